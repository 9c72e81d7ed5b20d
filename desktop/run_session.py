"""One run at a time: start engine.stream on the engine thread, forward its events, report how it ended."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from engine.api import Document, RunFinished, RunResult, RunSettings, run_order
from desktop.engine_host import EngineHost
from desktop.job_session import EngineJobSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRequest:
    document: Document
    question: str
    mode: str  # "both" | "baseline" | "spec"
    settings: RunSettings

    @property
    def runs(self) -> tuple[str, ...]:
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
        log.info("run %s: keep=%.2f positions=%s", request.mode, request.settings.keep, request.settings.positions)
        return self._start(request, f"{request.mode} run", lambda engine, ctx: engine.stream(
            document=request.document,
            question=request.question,
            mode=request.mode,
            settings=request.settings,
            cancel=ctx.cancel,
            spec_first=True,
        ))

    def _forget_results(self) -> None:
        self._results = {}

    def _on_event(self, event: object) -> None:
        if isinstance(event, RunFinished):
            self._results[event.result.run] = event.result
        self.event.emit(event)
