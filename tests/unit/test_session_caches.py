"""A session's other caches, on the tiny random pair: the draft's keys for the document
(`spec_cached_draft`) and the background full prefill into the prefix context.

The key properties: a cached draft scores the document as a cold one does, and a background
fill, however often it is interrupted (between batches or in the middle of one), leaves the
prefix a cold full prefill leaves: the follow-up's answer is the cold answer.
"""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from engine.core.cancel import CancelToken
from engine.core.events import BackgroundEnded, BackgroundProgress, Notice, RunFinished, SelectionMade
from engine.core.settings import RunSettings
from engine.pipeline import DocumentSession
from engine.pipeline.draft_cache import DraftCaches
from engine.pipeline.state_store import StateStore

# Several of the engine's 64-token batches, so a fill has batches to be interrupted between.
DOCUMENT = " ".join(
    f"Shelf {i} holds the {['oak', 'pine', 'ash', 'elm'][i % 4]} box number {i * 3}." for i in range(11)
)
QUESTIONS = ["Which shelf holds box 27?", "What wood is shelf 5?", "How many shelves are there?"]


def settings(**overrides) -> RunSettings:
    values = dict(keep=0.25, chunk_size=8, max_new_tokens=8, force=True)
    values.update(overrides)
    return RunSettings(**values)


def finished(events) -> list:
    return [e.result for e in events if isinstance(e, RunFinished)]


def ask(engine, session, question, mode="auto", **overrides):
    events = list(engine.ask(session, question, mode, settings(**overrides)))
    (result,) = finished(events)
    return result, events


def cold_answer(engine, question) -> str:
    (result,) = finished(engine.stream(DOCUMENT, question, "baseline", settings()))
    return result.answer


def selection(events):
    (made,) = [e.selection for e in events if isinstance(e, SelectionMade)]
    return made


@pytest.fixture(autouse=True)
def fresh_caches(engine, monkeypatch, tmp_path):
    """Each test starts with empty caches: a draft cache of the default size, saved states in tmp."""
    monkeypatch.setattr(engine, "draft_caches", DraftCaches(1 << 30))
    monkeypatch.setattr(engine, "state_store", StateStore(tmp_path / "states", 1 << 30))
    engine._prefix_runtime().context.clear()


# -- the draft's cache ------------------------------------------------------------------------
def test_a_follow_up_spec_run_scores_with_the_cached_draft_as_a_cold_one_does(engine):
    session = DocumentSession(DOCUMENT)
    cold, cold_events = ask(engine, session, QUESTIONS[0], "spec")
    cached, cached_events = ask(engine, session, QUESTIONS[0], "spec")
    assert (cold.served_by, cached.served_by) == ("spec", "spec_cached_draft")
    np.testing.assert_allclose(
        selection(cached_events).chunk_scores, selection(cold_events).chunk_scores, rtol=1e-5, atol=1e-9
    )
    assert selection(cached_events).kept_chunks == selection(cold_events).kept_chunks
    assert cached.answer == cold.answer
    assert engine.draft_caches.total_bytes() > 0


def test_another_question_reuses_the_draft_and_a_changed_window_does_not(engine):
    session = DocumentSession(DOCUMENT)
    assert ask(engine, session, QUESTIONS[0], "spec")[0].served_by == "spec"
    assert ask(engine, session, QUESTIONS[1], "spec")[0].served_by == "spec_cached_draft"
    assert ask(engine, session, QUESTIONS[2], "spec", draft_window=32)[0].served_by == "spec"


def test_the_draft_cache_off_or_too_small_scores_every_question_cold(engine, monkeypatch):
    session = DocumentSession(DOCUMENT)
    monkeypatch.setattr(engine, "draft_caches", None)
    assert [ask(engine, session, q, "spec")[0].served_by for q in QUESTIONS[:2]] == ["spec", "spec"]
    monkeypatch.setattr(engine, "draft_caches", DraftCaches(1024))  # far below one document's keys
    result, events = ask(engine, session, QUESTIONS[0], "spec")
    assert result.served_by == "spec"
    assert any(isinstance(e, Notice) and "larger than the draft cache" in e.message for e in events)
    assert ask(engine, session, QUESTIONS[1], "spec")[0].served_by == "spec"


def test_the_least_recently_used_document_leaves_the_draft_cache_first(engine, monkeypatch):
    first, second = DocumentSession(DOCUMENT), DocumentSession(DOCUMENT + " The end.")
    ask(engine, first, QUESTIONS[0], "spec")
    one_document = engine.draft_caches.total_bytes()
    monkeypatch.setattr(engine.draft_caches, "cap", int(one_document * 1.5))
    ask(engine, second, QUESTIONS[0], "spec")
    assert ask(engine, second, QUESTIONS[1], "spec")[0].served_by == "spec_cached_draft"
    assert ask(engine, first, QUESTIONS[1], "spec")[0].served_by == "spec"  # evicted


# -- the background full prefill ----------------------------------------------------------------
def test_nothing_to_fill_before_a_question_or_with_the_setting_off(engine):
    session = DocumentSession(DOCUMENT)
    assert list(engine.background_prefill(session, settings())) == [BackgroundEnded("not_needed", 0, 0, 0.0)]
    ask(engine, session, QUESTIONS[0])
    assert engine.background_needed(session, settings())
    assert not engine.background_needed(session, settings(background_prefill=False))


def test_a_filled_prefix_answers_follow_ups_as_a_cold_full_prefill(engine):
    session = DocumentSession(DOCUMENT)
    assert ask(engine, session, QUESTIONS[0])[0].served_by == "spec"
    events = list(engine.background_prefill(session, settings()))
    progress = [e for e in events if isinstance(e, BackgroundProgress)]
    assert len(progress) > 2 and [p.done for p in progress] == sorted(p.done for p in progress)
    assert events[-1].status == "done" and events[-1].done == events[-1].total == progress[-1].done
    assert not engine.background_needed(session, settings())
    result = ask(engine, session, QUESTIONS[1])[0]
    assert result.served_by == "cached_full" and result.answer == cold_answer(engine, QUESTIONS[1])
    assert engine.state_store.has(engine._prefix_key(session, settings()))  # saved, as after a cold prefill


def test_a_question_pauses_the_fill_between_batches_and_it_resumes_where_it_stopped(engine):
    session = DocumentSession(DOCUMENT)
    ask(engine, session, QUESTIONS[0])
    fill = engine.background_prefill(session, settings())
    first = next(fill)
    assert isinstance(first, BackgroundProgress) and 0 < first.done < first.total
    assert ask(engine, session, QUESTIONS[1])[0].served_by == "spec_cached_draft"  # the fill is not done yet
    assert list(fill)[-1] == BackgroundEnded("paused", first.done, first.total, pytest.approx(0, abs=60))
    resumed = list(engine.background_prefill(session, settings()))
    assert resumed[0].done > first.done  # it did not start over
    assert resumed[-1].status == "done"
    assert ask(engine, session, QUESTIONS[2])[0].answer == cold_answer(engine, QUESTIONS[2])


class CancelAfter(CancelToken):
    """Cancelled after `polls` reads: llama.cpp's abort hook reads it many times in one batch,
    so this cancels in the middle of a batch's compute."""

    def __init__(self, polls: int):
        super().__init__()
        self.polls = polls

    @property
    def cancelled(self) -> bool:
        self.polls -= 1
        return self.polls < 0


def test_a_fill_aborted_inside_a_batch_resumes_from_the_batch_before_and_answers_as_cold(
    engine, monkeypatch, caplog
):
    session = DocumentSession(DOCUMENT)
    ask(engine, session, QUESTIONS[0])
    context = engine._prefix_runtime().context
    codes, decode = [], context.decode
    monkeypatch.setattr(context, "decode", lambda *args: codes.append(decode(*args)) or codes[-1])
    with caplog.at_level(logging.DEBUG, logger="engine.llama.native"):
        events = list(engine.background_prefill(session, settings(), CancelAfter(polls=60)))
    assert codes[-1] == 2  # llama.cpp aborted the batch in its compute, not between batches
    aborted = [r for r in caplog.records if "compute status: 1" in r.getMessage()]
    assert aborted and all(r.levelno == logging.DEBUG for r in aborted)  # an abort on purpose is no warning
    ended = events[-1]
    assert ended.status == "cancelled" and ended.done < ended.total
    assert ended.done % engine._prefix_runtime().context.n_batch == 0  # a whole number of batches held
    assert list(engine.background_prefill(session, settings()))[-1].status == "done"
    result = ask(engine, session, QUESTIONS[1])[0]
    assert result.served_by == "cached_full" and result.answer == cold_answer(engine, QUESTIONS[1])


def test_a_question_from_another_thread_takes_the_target_from_a_running_fill(engine):
    session = DocumentSession(DOCUMENT)
    ask(engine, session, QUESTIONS[0])
    ends: list[BackgroundEnded] = []
    started = threading.Event()

    def fill():
        for event in engine.background_prefill(session, settings()):
            started.set()
            if isinstance(event, BackgroundEnded):
                ends.append(event)

    worker = threading.Thread(target=fill)
    worker.start()
    assert started.wait(30)
    result = ask(engine, session, QUESTIONS[1])[0]  # never refused as busy, never stuck behind the fill
    worker.join(30)
    assert not worker.is_alive() and len(ends) == 1
    assert result.served_by in ("spec_cached_draft", "cached_full")
    assert (ends[0].status == "done") == (result.served_by == "cached_full" or ends[0].done == ends[0].total)


# -- compare and forget -------------------------------------------------------------------------
def test_compare_on_a_follow_up_is_the_cached_full_document_against_the_cached_draft(engine):
    session = DocumentSession(DOCUMENT)
    first = finished(engine.ask_both(session, QUESTIONS[0], settings()))
    follow_up = finished(engine.ask_both(session, QUESTIONS[1], settings()))
    assert [(r.run, r.served_by) for r in first] == [("spec", "spec"), ("baseline", "cold_full")]
    assert [(r.run, r.served_by) for r in follow_up] == [
        ("spec", "spec_cached_draft"),
        ("baseline", "cached_full"),
    ]
    assert session.answered == 2


def test_forget_drops_every_cache_of_the_document(engine):
    session = DocumentSession(DOCUMENT)
    finished(engine.ask_both(session, QUESTIONS[0], settings()))
    key = engine._prefix_key(session, settings())
    assert session.full_prefix_tokens and engine.state_store.has(key) and engine.draft_caches.total_bytes()
    engine.forget(session, saved=True)
    assert session.full_prefix_tokens == 0 and not engine.state_store.has(key)
    assert engine.draft_caches.total_bytes() == 0 and not engine.background_needed(session, settings())
    assert ask(engine, session, QUESTIONS[1], "baseline")[0].served_by == "cold_full"


# -- the session benchmark ----------------------------------------------------------------------
@pytest.mark.slow
def test_the_session_benchmark_measures_each_path_it_names(engine):
    from engine.eval.session_bench import SessionBenchRow, run_session_bench

    items = list(run_session_bench(engine, DOCUMENT, [300], settings()))
    served = [e.result.served_by for e in items if isinstance(e, RunFinished)]
    assert served == [
        "spec",
        "spec_cached_draft",
        "spec_cached_draft",
        "cold_full",
        "cached_full",
        "saved_state",
    ]
    (row,) = [i for i in items if isinstance(i, SessionBenchRow)]
    assert row.tokens == 300 and row.prompt_tokens > 300 and 0 < row.question_tokens < row.tokens
    assert min(row.cold_full_ttft_s, row.cold_spec_ttft_s, row.cached_full_ttft_s, row.saved_state_ttft_s) > 0
    assert row.draft_cache_bytes > 0
    assert row.state_file_bytes > 0 and 0 < row.rss_with_both_caches_bytes <= row.peak_rss_bytes
