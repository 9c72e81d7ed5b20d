"""PrefixCaches: the document prefix's key, its saved state on disk, and the draft cache's notes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from engine.core.events import Notice, StageChanged
from engine.pipeline.draft_cache import DocumentSegments, DraftCaches
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.session import DocumentSession
from engine.pipeline.state_store import StateStore
from tests.unit.owner_helpers import DOCUMENT, drain, noted_session, opened_prefix_context, settings


@pytest.fixture
def prefix_context(engine):
    yield from opened_prefix_context(engine)


def test_the_key_changes_with_the_system_prompt_only(engine):
    caches = PrefixCaches(engine.info)
    session = DocumentSession(DOCUMENT)
    assert caches.key(session, settings()) == caches.key(session, settings(keep=0.5))
    assert caches.key(session, settings(system_prompt="Answer briefly.")) != caches.key(session, settings())


def test_without_a_store_nothing_is_saved_or_loaded(engine, prefix_context):
    caches = PrefixCaches(engine.info)
    session, key, prefix = noted_session(engine, caches, settings())
    runtime = prefix_context.runtime()
    assert not caches.has_saved(key)
    assert caches.save(key, prefix, runtime) == ""
    assert drain(caches.load_saved("baseline", key, prefix, runtime)) == ([], 0)


def fill(runtime, prefix) -> None:
    runtime.prefill(np.asarray(prefix, dtype=np.int32), np.arange(len(prefix), dtype=np.int32))


def test_a_saved_prefix_loads_back_and_forget_drops_it(engine, prefix_context, tmp_path):
    caches = PrefixCaches(engine.info, StateStore(tmp_path / "states", 1 << 30))
    session, key, prefix = noted_session(engine, caches, settings())
    runtime = prefix_context.runtime()
    fill(runtime, prefix)
    assert caches.save(key, prefix, runtime) == ""
    assert caches.has_saved(key)

    runtime.context.clear()
    events, loaded = drain(caches.load_saved("baseline", key, prefix, runtime))
    assert loaded == len(prefix)
    assert [type(e) for e in events] == [StageChanged]

    caches.forget(session, saved=True, draft=False)
    assert not caches.has_saved(key)


def test_a_state_larger_than_the_store_is_not_saved_and_says_why(engine, prefix_context, tmp_path):
    caches = PrefixCaches(engine.info, StateStore(tmp_path / "states", 1))
    _, key, prefix = noted_session(engine, caches, settings())
    runtime = prefix_context.runtime()
    fill(runtime, prefix)
    assert "larger than the saved-state cache size" in caches.save(key, prefix, runtime)
    assert not caches.has_saved(key)


def test_a_damaged_saved_state_is_refused_with_a_notice(engine, prefix_context, tmp_path):
    store = StateStore(tmp_path / "states", 1 << 30)
    caches = PrefixCaches(engine.info, store)
    _, key, prefix = noted_session(engine, caches, settings())
    runtime = prefix_context.runtime()
    fill(runtime, prefix)
    assert caches.save(key, prefix, runtime) == ""
    for path in (tmp_path / "states").rglob("*"):
        if path.is_file():
            path.write_bytes(b"not a state")
    runtime.context.clear()
    events, loaded = drain(caches.load_saved("baseline", key, prefix, runtime))
    assert loaded == 0
    assert any(isinstance(e, Notice) and "saved state not used" in e.message for e in events)


def test_the_draft_cache_off_gives_no_draft_prefix_nor_segments(engine):
    caches = PrefixCaches(engine.info, draft_caches=None)
    session, key, prefix = noted_session(engine, caches, settings())
    assert caches.draft_prefix(key, prefix, 0) is None
    assert caches.draft_segments(session, settings()) is None
    on = PrefixCaches(engine.info, draft_caches=DraftCaches(1 << 30))
    assert on.draft_segments(None, settings()) is None  # one-shot runs keep nothing
    assert isinstance(on.draft_segments(session, settings()), DocumentSegments)


def test_the_segments_note_says_how_many_segments_a_follow_up_scores_again(engine):
    caches = PrefixCaches(engine.info, draft_caches=DraftCaches(4096))
    pieces = [(0, 10), (10, 20), (20, 30)]
    some = SimpleNamespace(count_held=lambda pieces, tokens, span: 1)
    every = SimpleNamespace(count_held=lambda pieces, tokens, span: len(pieces))
    assert "keeps the draft's keys for 1 of this document's 3 segments" in caches.segments_kept_note(
        some, pieces, [], (0, 30)
    )
    assert caches.segments_kept_note(every, pieces, [], (0, 30)) == ""
