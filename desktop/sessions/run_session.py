"""One run at a time: ask the engine on its thread, forward the events, report how it ended.

With the document's session (engine.api.DocumentSession) a question goes through `ask` (one run)
or `ask_both` (the compare), so follow-ups reuse the document's caches; without one it is the
one-shot `stream`. Questions pause the background fill (the engine does), so they never queue
behind it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from desktop.sessions.engine_host import EngineHost
from desktop.sessions.job_session import EngineJobSession
from engine.api import Document, RunFinished, RunResult, RunSettings, run_order

log = logging.getLogger(__name__)

AUTO = "auto"  # the engine's session mode that picks the fastest path for one answer


@dataclass(frozen=True)
class RunRequest:
    document: Document
    question: str
    mode: str  # "both" | "baseline" | "spec" | "auto" (the engine picks the run)
    settings: RunSettings
    session: Any = None  # the document's engine.api.DocumentSession; None: a one-shot stream

    @property
    def runs(self) -> tuple[str, ...]:
        """The runs known before it starts; () for "auto", whose run the first event names."""
        if self.mode == AUTO:
            return ()
        return tuple(run_order(self.mode, spec_first=True))  # the fast answer first


class RunSession(EngineJobSession):
    event = Signal(object)  # each engine event

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(host, parent)
        self._results: dict[str, RunResult] = {}

    @property
    def results(self) -> dict[str, RunResult]:
        """Results of the current (or last) request, by run name."""
        return dict(self._results)

    def start(self, request: RunRequest) -> bool:
        """Start a run; refused (False) while one is active or without an engine."""
        log.info(
            "run %s: keep=%s positions=%s", request.mode, request.settings.keep, request.settings.positions
        )
        return self._start(
            request,
            f"{request.mode} run",
            lambda engine, ctx: _events(engine, request, ctx),
            preempts_background=True,
        )

    def _forget_results(self) -> None:
        self._results = {}

    def _on_event(self, event: object) -> None:
        if isinstance(event, RunFinished):
            self._results[event.result.run] = event.result
        self.event.emit(event)


def _events(engine, request: RunRequest, ctx):
    """The engine call that answers `request`."""
    if request.session is None:
        return engine.stream(
            document=request.document,
            question=request.question,
            mode=request.mode,
            settings=request.settings,
            cancel=ctx.cancel,
            spec_first=True,
        )
    if request.mode == "both":
        return engine.ask_both(
            request.session, request.question, request.settings, ctx.cancel, spec_first=True
        )
    return engine.ask(request.session, request.question, request.mode, request.settings, ctx.cancel)
