"""BackgroundFill: fills a session's noted prefix batch by batch, yields to requests, saves when done."""

from __future__ import annotations

import pytest

from engine.core.cancel import CancelToken
from engine.core.events import BackgroundEnded, BackgroundProgress
from engine.pipeline.background_fill import BackgroundFill
from engine.pipeline.locking import TargetLocks
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.session import DocumentSession
from engine.pipeline.state_store import StateStore
from tests.unit.owner_helpers import DOCUMENT, noted_session, opened_prefix_context, settings


@pytest.fixture
def prefix_context(engine):
    yield from opened_prefix_context(engine)


@pytest.fixture
def parts(engine, prefix_context, tmp_path):
    locks = TargetLocks()
    prefixes = PrefixCaches(engine.info, StateStore(tmp_path / "states", 1 << 30))
    return locks, prefixes, BackgroundFill(locks, prefix_context, prefixes)


def test_nothing_to_fill_before_a_question_or_with_the_setting_off(engine, parts):
    _, prefixes, fill = parts
    assert not fill.needed(DocumentSession(DOCUMENT), settings(background_prefill=True))
    assert list(fill.run(DocumentSession(DOCUMENT), settings(background_prefill=True))) == [
        BackgroundEnded("not_needed", 0, 0, 0.0)
    ]
    session, _, _ = noted_session(engine, prefixes, settings())
    assert not fill.needed(session, settings(background_prefill=False))
    assert fill.needed(session, settings(background_prefill=True))


def test_a_fill_runs_to_the_end_in_whole_batches_and_saves_the_prefix(engine, parts, prefix_context):
    _, prefixes, fill = parts
    run_settings = settings(background_prefill=True)
    session, key, prefix = noted_session(engine, prefixes, run_settings)
    events = list(fill.run(session, run_settings))
    *progress, ended = events
    n_batch = prefix_context.runtime().context.n_batch
    assert len(prefix) > n_batch  # several batches, or this proves little
    assert [p.done for p in progress] == [
        min(n, len(prefix)) for n in range(n_batch, len(prefix) + n_batch, n_batch)
    ]
    assert all(isinstance(p, BackgroundProgress) for p in progress)
    assert (ended.status, ended.done, ended.total, ended.detail) == ("done", len(prefix), len(prefix), "")
    assert session.holds_full(key) and prefixes.has_saved(key)
    assert not fill.needed(session, run_settings)


def test_a_request_holding_the_target_pauses_the_fill(engine, parts):
    locks, prefixes, fill = parts
    run_settings = settings(background_prefill=True)
    session, _, prefix = noted_session(engine, prefixes, run_settings)
    with locks.exclusive():
        events = list(fill.run(session, run_settings))
    assert events == [BackgroundEnded("paused", 0, len(prefix), events[-1].seconds)]
    assert fill.needed(session, run_settings)  # the next call resumes it


def test_a_cancelled_fill_ends_cancelled(engine, parts):
    _, prefixes, fill = parts
    run_settings = settings(background_prefill=True)
    session, _, _ = noted_session(engine, prefixes, run_settings)
    cancel = CancelToken()
    cancel.cancel()
    (ended,) = list(fill.run(session, run_settings, cancel))
    assert ended.status == "cancelled" and ended.done == 0
