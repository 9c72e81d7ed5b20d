"""Session benchmark: every way a document session can serve a question, at several lengths.

For each length, on one document (the first N tokens of real text, as `bench`):
  cold_spec          the first question by SpecPrefill (draft and target cold)
  spec_cached_draft  a follow-up by SpecPrefill, the draft's keys for the document cached;
                     once alone and once while a background full prefill runs (it must yield)
  cold_full          a full prefill with nothing cached (it saves the prefix state afterwards)
  cached_full        a follow-up from the full prefix held in memory
  saved_state        the first question after reopening: the prefix loaded from its saved state
Memory: the draft cache's bytes, the saved state's file size, the process's resident memory with
both caches full (after the cached follow-up) and its peak during the length's runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

import psutil

from engine.core.cancel import NEVER, CancelToken
from engine.core.events import EngineEvent, RunFinished, RunResult
from engine.core.settings import RunSettings
from engine.eval.bench import BENCH_QUESTION
from engine.pipeline import DocumentSession, Engine

# About 30 tokens, as a user's follow-up: the cached paths prefill this and the template's tail.
FOLLOW_UP = (
    "Which names, numbers or settings does the document mention most often, and in which part "
    "of the document does each of them first appear?"
)
BACKGROUND_HEAD_START_S = 3.0  # the fill runs this long before the follow-up arrives


@dataclass(frozen=True)
class SessionBenchRow:
    tokens: int
    prompt_tokens: int
    question_tokens: int  # the follow-up's tail: what the cached paths prefill
    cold_full_ttft_s: float
    cold_spec_ttft_s: float
    spec_cached_draft_ttft_s: float
    spec_cached_draft_during_background_ttft_s: float
    background_slowdown: float  # the latter over the former, minus 1
    cached_full_ttft_s: float
    saved_state_ttft_s: float  # reopening: the state's load included
    state_save_s: float
    draft_cache_bytes: int
    state_file_bytes: int
    rss_with_both_caches_bytes: int  # after the cached follow-up: the draft's keys and the full prefix held
    peak_rss_bytes: int  # sampled during this length's runs

    def to_json(self) -> dict:
        return asdict(self)


class _Answers:
    """Asks questions of one session, passing the events on and keeping each result."""

    def __init__(self, engine: Engine, settings: RunSettings, cancel: CancelToken):
        self.engine, self.settings, self.cancel = engine, settings, cancel
        self.results: list[RunResult] = []

    def ask(self, session: DocumentSession, question: str, mode: str, expect: str) -> Iterator[EngineEvent]:
        for event in self.engine.ask(session, question, mode, self.settings, self.cancel):
            if isinstance(event, RunFinished):
                if event.result.served_by != expect:  # a measurement of the wrong path is worse than none
                    raise RuntimeError(f"expected {expect}, the run was served by {event.result.served_by}")
                self.results.append(event.result)
            yield event

    @property
    def last(self) -> RunResult:
        return self.results[-1]


def _fill_in_background(
    engine: Engine, session: DocumentSession, settings: RunSettings, cancel: CancelToken
) -> threading.Thread:
    def fill():
        for _ in engine.background_prefill(session, settings, cancel):
            pass

    thread = threading.Thread(target=fill, name="bench-background-fill", daemon=True)
    thread.start()
    return thread


class _PeakRss:
    """The process's largest resident memory while the block runs, sampled on a thread."""

    INTERVAL_S = 0.1

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench-rss", daemon=True)

    def _sample(self) -> None:
        process = psutil.Process()
        while not self._stop.is_set():
            self.peak = max(self.peak, process.memory_info().rss)
            self._stop.wait(self.INTERVAL_S)

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _session_paths(
    engine: Engine, text: str, n_tokens: int, settings: RunSettings, cancel: CancelToken
) -> Iterator[EngineEvent | SessionBenchRow]:
    with _PeakRss() as peak:
        yield from _measured_paths(engine, text, n_tokens, settings, cancel, peak)


def _measured_paths(
    engine: Engine, text: str, n_tokens: int, settings: RunSettings, cancel: CancelToken, peak: _PeakRss
) -> Iterator[EngineEvent | SessionBenchRow]:
    answers = _Answers(engine, settings, cancel)
    session = DocumentSession(text)
    engine.forget(session, saved=True)  # nothing from an earlier run may serve this one
    yield from answers.ask(session, BENCH_QUESTION, "spec", "spec")
    cold_spec = answers.last
    fill_cancel = CancelToken()
    fill = _fill_in_background(engine, session, settings, fill_cancel)
    time.sleep(BACKGROUND_HEAD_START_S)
    yield from answers.ask(session, FOLLOW_UP, "spec", "spec_cached_draft")
    during_fill = answers.last
    fill_cancel.cancel()
    fill.join()
    yield from answers.ask(session, FOLLOW_UP, "spec", "spec_cached_draft")
    alone = answers.last
    draft_cache_bytes = engine.draft_caches.total_bytes()

    engine.forget(session, saved=True, draft=False)  # the fill's partial prefix goes, the draft's keys stay
    t_saved = time.perf_counter()
    yield from answers.ask(session, BENCH_QUESTION, "baseline", "cold_full")
    cold_full = answers.last
    state_save_s = time.perf_counter() - t_saved - _run_seconds(cold_full)
    yield from answers.ask(session, FOLLOW_UP, "baseline", "cached_full")
    cached = answers.last
    rss_with_both_caches = psutil.Process().memory_info().rss

    reopened = DocumentSession(text)  # as after a restart: nothing in memory, the state on disk
    engine.forget(reopened)
    yield from answers.ask(reopened, FOLLOW_UP, "auto", "saved_state")
    saved = answers.last
    entries = [e for e in engine.state_store.entries() if e.document_sha256 == session.document_sha256]
    yield SessionBenchRow(
        tokens=n_tokens,
        prompt_tokens=cold_full.prompt_tokens,
        question_tokens=cached.prefill_tokens,
        cold_full_ttft_s=cold_full.ttft_s,
        cold_spec_ttft_s=cold_spec.ttft_s,
        spec_cached_draft_ttft_s=alone.ttft_s,
        spec_cached_draft_during_background_ttft_s=during_fill.ttft_s,
        background_slowdown=during_fill.ttft_s / alone.ttft_s - 1 if alone.ttft_s > 0 else 0.0,
        cached_full_ttft_s=cached.ttft_s,
        saved_state_ttft_s=saved.ttft_s,
        state_save_s=max(state_save_s, 0.0),
        draft_cache_bytes=draft_cache_bytes,
        state_file_bytes=sum(e.state_bytes for e in entries),
        rss_with_both_caches_bytes=rss_with_both_caches,
        peak_rss_bytes=max(peak.peak, rss_with_both_caches),
    )  # the sampler may have missed this moment


def _run_seconds(result: RunResult) -> float:
    """A run's time from its start to its last token (TTFT plus decoding)."""
    decoding = (result.generated_tokens - 1) / result.decode_tok_s if result.decode_tok_s > 0 else 0.0
    return result.ttft_s + decoding


def prefix_context_rss_bytes(engine: Engine) -> int:
    """What opening the sessions' prefix context adds to the process's resident memory (its KV
    cache is cleared at creation, so all of it is touched at once); 0 when it is open already."""
    before = psutil.Process().memory_info().rss
    engine.open_prefix_context()
    return max(psutil.Process().memory_info().rss - before, 0)


def run_session_bench(
    engine: Engine, source_text: str, lengths: list[int], settings: RunSettings, cancel: CancelToken = NEVER
) -> Iterator[EngineEvent | SessionBenchRow]:
    """Engine events as they come, then one SessionBenchRow per length. Needs the saved-state
    store on (state_cache_gb > 0) and the draft cache on (draft_cache_gb > 0)."""
    if engine.state_store is None or not engine.state_store.enabled or not engine.draft_caches:
        raise ValueError("the session benchmark needs the saved-state store and the draft cache on")
    tokens = engine.sample_tokens(source_text, max(lengths), "benchmark")
    for n_tokens in lengths:
        yield from _session_paths(engine, engine.detokenize(tokens[:n_tokens]), n_tokens, settings, cancel)
