"""The draft's read-ahead of an opened document (Engine.read_ahead), on the tiny random pair.

The key properties: what it reads is what a cold SpecPrefill would have drafted (the first question
after it keeps the same chunks and gives the same answer, `spec_read_ahead`, with the read-ahead's
seconds reported), a request takes the models from it at once and goes on from what it read, and
the setting or a Cancel stops it.
"""

from __future__ import annotations

import threading
import time

import pytest

from engine.core.cancel import CancelToken
from engine.core.events import ReadAheadEnded, ReadAheadProgress, RunFinished, SelectionMade
from engine.pipeline import DocumentSession
from engine.pipeline.draft_cache import DraftCaches
from tests.unit.test_session_caches import DOCUMENT, QUESTIONS, settings

CHUNK = 16  # the draft's prefill chunk here: the tiny document's prefix takes several


@pytest.fixture(autouse=True)
def small_chunks(engine, monkeypatch):
    monkeypatch.setattr(engine, "draft_caches", DraftCaches(1 << 30))
    monkeypatch.setattr(engine.scorer, "prefill_chunk", CHUNK)


def ask(engine, session, question=QUESTIONS[0], **overrides):
    events = list(engine.ask(session, question, "spec", settings(**overrides)))
    (result,) = [e.result for e in events if isinstance(e, RunFinished)]
    (made,) = [e.selection for e in events if isinstance(e, SelectionMade)]
    return result, made


def cold(engine, question=QUESTIONS[0], cache_bytes=1 << 30):
    """A SpecPrefill on a fresh session with an empty draft cache (or none: `cache_bytes` 0)."""
    engine.draft_caches = DraftCaches(cache_bytes)
    return ask(engine, DocumentSession(DOCUMENT), question)


@pytest.mark.parametrize("cold_cache_bytes", [1 << 30, 0], ids=["cold-cache-empty", "cold-cache-off"])
def test_read_ahead_fills_the_draft_cache_and_the_first_question_is_served_from_it(engine, cold_cache_bytes):
    cold_result, cold_selection = cold(engine, cache_bytes=cold_cache_bytes)
    engine.draft_caches = DraftCaches(1 << 30)
    session = DocumentSession(DOCUMENT)
    events = list(engine.read_ahead(session, settings()))
    *progress, ended = events
    assert isinstance(ended, ReadAheadEnded) and ended.status == "done"
    assert ended.done == ended.total > 3 * CHUNK and ended.seconds > 0
    assert [e.done for e in progress] == [
        min(n, ended.total) for n in range(CHUNK, ended.total + CHUNK, CHUNK)
    ]
    assert all(isinstance(e, ReadAheadProgress) for e in progress)
    assert engine.background_needed(session, settings())  # the target's full fill follows it

    result, made = ask(engine, session)
    assert result.served_by == "spec_read_ahead" and result.read_ahead_s > 0
    assert result.to_json()["read_ahead_s"] == result.read_ahead_s
    assert made.kept_chunks == cold_selection.kept_chunks  # it read what a cold draft reads
    assert result.answer == cold_result.answer
    follow_up, _ = ask(engine, session, QUESTIONS[1])
    assert follow_up.served_by == "spec_cached_draft" and follow_up.read_ahead_s == 0.0
    again = list(engine.read_ahead(session, settings()))
    assert [e.status for e in again] == ["not_needed"]


def test_a_request_between_chunks_takes_over_what_was_read(engine):
    cold_result, cold_selection = cold(engine)
    engine.draft_caches = DraftCaches(1 << 30)
    session = DocumentSession(DOCUMENT)
    reading = engine.read_ahead(session, settings())
    first = next(reading)
    assert isinstance(first, ReadAheadProgress) and first.done == CHUNK < first.total
    result, made = ask(engine, session)  # preempts the read-ahead, drafts the rest
    assert result.served_by == "spec_read_ahead" and result.read_ahead_s > 0
    assert made.kept_chunks == cold_selection.kept_chunks and result.answer == cold_result.answer
    (ended,) = list(reading)
    assert ended.status == "done" and ended.done == ended.total  # the request read the rest


def test_a_request_mid_chunk_preempts_the_read_ahead_within_a_layer(engine):
    cold_result, _ = cold(engine)
    engine.draft_caches = DraftCaches(1 << 30)
    session = DocumentSession(DOCUMENT)
    slow = threading.Event()
    slow.set()

    def slow_layer(*_) -> None:  # a chunk of the real draft takes seconds: here, each layer 0.15 s
        if slow.is_set():
            time.sleep(0.15)

    hooks = [layer.register_forward_pre_hook(slow_layer) for layer in engine.scorer.model.model.layers]
    events: list = []
    reader = threading.Thread(target=lambda: events.extend(engine.read_ahead(session, settings())))
    try:
        reader.start()
        deadline = time.monotonic() + 30
        while not events and time.monotonic() < deadline:  # the first chunk is read: the next is under way
            time.sleep(0.01)
        assert events
        started = time.perf_counter()
        answer = engine.ask(session, QUESTIONS[0], "spec", settings())
        first_event = next(answer)  # the request has the models
        took = time.perf_counter() - started
        slow.clear()
        rest = [first_event, *answer]
    finally:
        slow.clear()
        for hook in hooks:
            hook.remove()
        reader.join(10)
    assert took < 1.0
    (result,) = [e.result for e in rest if isinstance(e, RunFinished)]
    assert result.answer == cold_result.answer and result.served_by == "spec_read_ahead"
    assert events[-1].status == "paused"


def test_read_ahead_off_by_the_setting(engine):
    session = DocumentSession(DOCUMENT)
    assert list(engine.read_ahead(session, settings(read_ahead=False))) == [ReadAheadEnded("off", 0, 0, 0.0)]
    assert engine.draft_caches.total_bytes() == 0 and session.read_ahead_s == 0.0
    result, _ = ask(engine, session)
    assert result.served_by == "spec" and result.read_ahead_s == 0.0


def test_cancel_stops_the_read_ahead_and_forget_drops_it(engine):
    session = DocumentSession(DOCUMENT)
    cancel = CancelToken()
    reading = engine.read_ahead(session, settings(), cancel)
    next(reading)
    cancel.cancel()  # the document changed
    (ended,) = list(reading)
    assert ended.status == "cancelled" and 0 < ended.done < ended.total
    engine.forget(session)
    assert engine.draft_caches.total_bytes() == 0
    result, _ = ask(engine, DocumentSession(DOCUMENT))
    assert result.served_by == "spec"  # nothing read is left for the document
