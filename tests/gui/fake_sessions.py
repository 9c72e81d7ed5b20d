"""The session half of the GUI's FakeEngine: ask, ask_both, the background full prefill, forget.

It follows engine.pipeline.Engine's session contract with fake timings:
- a full (baseline) run leaves the document's full prefix cached: the next full run is
  served "cached_full" (a tenth of the TTFT); with session_config.draft_cache a SpecPrefill
  run after the first one is "spec_cached_draft";
- "auto" answers the first question by SpecPrefill, every later one from the full prefix;
- background_prefill fills the prefix batch by batch, remembers how far it came, and ends
  "paused" the moment a foreground ask/ask_both starts (which waits until it has let go of
  the target, as the real engine's exclusive lock does);
- read_ahead reads the document in read_ahead_chunks steps (the draft's read-ahead on open), ends
  "paused" when a foreground run starts and "cancelled" on Cancel, and marks the draft cached;
- forget drops the session's caches and partial fill.

FakeEngine (conftest) mixes this in; it uses FakeEngine._run and its config.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace

from engine.core.cancel import CancelToken
from engine.core.events import (
    BackgroundEnded,
    BackgroundProgress,
    Notice,
    ReadAheadEnded,
    ReadAheadProgress,
    RunFinished,
    run_order,
)
from engine.core.settings import RunSettings
from engine.pipeline.session import DocumentSession

SPEC_SERVED = ("spec", "spec_cached_draft")
BACKGROUND_LETGO_S = 2.0  # how long a foreground run waits for the background to let go of the target


def for_run(run: str, settings: RunSettings, compare: bool) -> RunSettings:
    """As engine.pipeline.request.for_run: a compare's full prefill of a too-long document is cut, not refused."""
    return replace(settings, truncate=True) if compare and run == "baseline" else settings


@dataclass
class FakeSessionConfig:
    """The session timings; tests change them on engine_factory.engine.session_config."""

    background_batches: int = 8
    background_batch_s: float = 0.02
    cached_ttft_factor: float = 0.1  # a run from the cached full prefix takes a tenth of the cold TTFT
    draft_cache: bool = (
        False  # the draft caches a document's keys: SpecPrefill follow-ups "spec_cached_draft"
    )
    background_error: str | None = None  # the background ends "failed" with this detail
    read_ahead_chunks: int = 4
    read_ahead_chunk_s: float = 0.02


@dataclass
class FakeSessionState:
    """What the fake's target and draft hold for one session."""

    session: DocumentSession  # held, so its id is never reused while this state lives
    filled: int = 0  # prefix tokens the background fill has done
    full: bool = False  # the whole prefix is cached
    draft_cached: bool = False


class FakeSessions:
    """ask / ask_both / background_prefill / background_needed / forget for the fake engine."""

    @property
    def session_config(self) -> FakeSessionConfig:
        if "_session_config" not in vars(self):
            self._session_config = FakeSessionConfig()
        return self._session_config

    def _session_init(self) -> None:
        if "_states" in vars(self):
            return
        self._states: dict[int, FakeSessionState] = {}
        self._foreground = 0  # foreground runs in progress: the background yields to them
        self._background_idle = threading.Event()
        self._background_idle.set()
        self.background_calls: list[BackgroundEnded] = []  # how each background fill ended
        self.read_ahead_calls: list[ReadAheadEnded] = []  # how each read-ahead ended
        self.forgotten: list[tuple[DocumentSession, bool]] = []

    def session_state(self, session: DocumentSession) -> FakeSessionState:
        self._session_init()
        return self._states.setdefault(id(session), FakeSessionState(session))

    # --- foreground ----------------------------------------------------------------------------

    def ask(
        self,
        session: DocumentSession,
        question: str,
        mode: str = "auto",
        settings: RunSettings | None = None,
        cancel: CancelToken | None = None,
    ):
        settings, cancel = settings or RunSettings(), cancel or CancelToken()
        self.requests.append(
            {
                "mode": mode,
                "question": question,
                "settings": settings,
                "spec_first": False,
                "session": session,
            }
        )
        state = self.session_state(session)
        run = (
            "spec"
            if mode == "spec" or (mode == "auto" and session.answered == 0 and not state.full)
            else "baseline"
        )
        with self._holding_target():
            yield from self._notices()
            yield from self._session_run(run, session, question, settings, cancel)

    def ask_both(
        self,
        session: DocumentSession,
        question: str,
        settings: RunSettings | None = None,
        cancel: CancelToken | None = None,
        spec_first: bool = True,
    ):
        settings, cancel = settings or RunSettings(), cancel or CancelToken()
        self.requests.append(
            {
                "mode": "both",
                "question": question,
                "settings": settings,
                "spec_first": spec_first,
                "session": session,
            }
        )
        with self._holding_target():
            yield from self._notices()
            for run in run_order("both", spec_first):
                yield from self._session_run(run, session, question, for_run(run, settings, True), cancel)

    def _notices(self):
        if self.config.notice:  # as the fake's stream: a run-less Notice first
            yield Notice(None, self.config.notice)

    @contextmanager
    def _holding_target(self):
        """A foreground run: the background fill pauses, and this waits until it has let go."""
        self._session_init()
        self._foreground += 1
        try:
            self._background_idle.wait(BACKGROUND_LETGO_S)
            yield
        finally:
            self._foreground -= 1

    def _session_run(
        self, run: str, session: DocumentSession, question: str, settings: RunSettings, cancel: CancelToken
    ):
        from tests.gui.conftest import build_prompt  # conftest imports this module

        state = self.session_state(session)
        served_by = self._served_by(run, state)
        prompt, doc_span = build_prompt(session.text, question)
        for event in self._run(run, prompt, doc_span, settings, cancel):
            if isinstance(event, RunFinished):
                event = self._finished(event, served_by, state, session)
            yield event

    def _served_by(self, run: str, state: FakeSessionState) -> str:
        if run == "spec":
            return "spec_cached_draft" if state.draft_cached and self.session_config.draft_cache else "spec"
        return "cached_full" if state.full else "cold_full"

    def _finished(
        self, event: RunFinished, served_by: str, state: FakeSessionState, session: DocumentSession
    ) -> RunFinished:
        result = event.result
        if result.bypassed:  # a bypassed SpecPrefill runs as a full prefill does
            served_by = "cached_full" if state.full else "cold_full"
        if served_by in SPEC_SERVED:
            state.draft_cached = True
        else:
            self._cache_full(state)
        ttft = result.ttft_s * (self.session_config.cached_ttft_factor if served_by == "cached_full" else 1.0)
        session.answered += 1
        return RunFinished(event.run, replace(result, served_by=served_by, ttft_s=ttft))

    def _cache_full(self, state: FakeSessionState) -> None:
        state.full, state.filled = True, self._prefix_tokens(state.session)

    def _prefix_tokens(self, session: DocumentSession) -> int:
        from tests.gui.conftest import CHARS_PER_TOKEN, SYSTEM_PROMPT

        return (len(SYSTEM_PROMPT) + len(session.text)) // CHARS_PER_TOKEN

    # --- background -----------------------------------------------------------------------------

    def background_needed(self, session: DocumentSession, settings: RunSettings) -> bool:
        return settings.background_prefill and not self.session_state(session).full

    def background_prefill(self, session: DocumentSession, settings: RunSettings, cancel: CancelToken):
        state = self.session_state(session)
        total = self._prefix_tokens(session)
        self._background_idle.clear()
        try:
            needed = self.background_needed(session, settings)  # as the engine: one "not_needed" end
            ended = (
                (yield from self._fill(state, total, cancel))
                if needed
                else BackgroundEnded(
                    "not_needed", total if state.full else 0, total if state.full else 0, 0.0
                )
            )
        finally:
            self._background_idle.set()
        self.background_calls.append(ended)
        yield ended

    def read_ahead(self, session: DocumentSession, settings: RunSettings, cancel: CancelToken):
        cfg, state = self.session_config, self.session_state(session)
        total, started, status = self._prefix_tokens(session), time.monotonic(), "done"
        self._background_idle.clear()
        try:
            if not settings.read_ahead:
                status = "off"
            for chunk in range(1, cfg.read_ahead_chunks + 1) if status == "done" else ():
                status = self._interrupted(cancel, cfg.read_ahead_chunk_s) or "done"
                if status != "done":
                    break
                yield ReadAheadProgress(total * chunk // cfg.read_ahead_chunks, total)
        finally:
            self._background_idle.set()
        state.draft_cached = state.draft_cached or status == "done"
        ended = ReadAheadEnded(status, total if status == "done" else 0, total, time.monotonic() - started)
        self.read_ahead_calls.append(ended)
        yield ended

    def _fill(self, state: FakeSessionState, total: int, cancel: CancelToken):
        """Batches from where the last call stopped; returns how it ended (not yet yielded)."""
        cfg = self.session_config
        if state.full:
            return BackgroundEnded("not_needed", total, total, 0.0)
        started, batch = time.monotonic(), -(-total // cfg.background_batches)
        while state.filled < total:
            status = self._interrupted(cancel, cfg.background_batch_s)
            if status:
                return BackgroundEnded(status, state.filled, total, time.monotonic() - started)
            if cfg.background_error:
                return BackgroundEnded(
                    "failed", state.filled, total, time.monotonic() - started, cfg.background_error
                )
            state.filled = min(state.filled + batch, total)
            yield BackgroundProgress(state.filled, total)
        self._cache_full(state)
        return BackgroundEnded("done", total, total, time.monotonic() - started)

    def _interrupted(self, cancel: CancelToken, seconds: float) -> str:
        """Wait one batch; "paused" when a foreground run wants the target, "cancelled" on Cancel."""
        end = time.monotonic() + seconds
        while True:
            if self._foreground:
                return "paused"
            if cancel.cancelled:
                return "cancelled"
            if time.monotonic() >= end:
                return ""
            time.sleep(0.002)

    # --- forget ------------------------------------------------------------------------------------

    def forget(self, session: DocumentSession, saved: bool = False) -> None:
        self._session_init()
        self.forgotten.append((session, saved))
        self._states.pop(id(session), None)
