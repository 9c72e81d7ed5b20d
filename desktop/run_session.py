"""One run at a time: start engine.stream on the engine thread, forward its events, report how it ended."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from engine.events import RunFinished, RunResult
from engine.ingest.document import Document
from engine.settings import RunSettings
from desktop.engine_host import EngineHost
from desktop.worker import Worker

log = logging.getLogger(__name__)

FINISHED, CANCELLED, FAILED = "finished", "cancelled", "failed"


@dataclass(frozen=True)
class RunRequest:
    document: Document
    question: str
    mode: str  # "both" | "baseline" | "spec"
    settings: RunSettings

    @property
    def runs(self) -> tuple[str, ...]:
        return ("baseline", "spec") if self.mode == "both" else (self.mode,)


class RunSession(QObject):
    started = Signal(object)  # RunRequest
    event = Signal(object)  # each engine event
    ended = Signal(str, str)  # outcome, message (the error for FAILED)

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._host = host
        self._worker: Worker | None = None
        self._request: RunRequest | None = None
        self._results: dict[str, RunResult] = {}

    @property
    def is_active(self) -> bool:
        return self._worker is not None and self._worker.active

    @property
    def request(self) -> RunRequest | None:
        return self._request

    @property
    def results(self) -> dict[str, RunResult]:
        """Results of the current (or last) request, by run name."""
        return dict(self._results)

    def start(self, request: RunRequest) -> bool:
        """Start a run; refused (False) while one is active or without an engine."""
        if self.is_active or not self._host.is_ready:
            return False
        self._request = request
        self._results = {}
        log.info("run %s: keep=%.2f positions=%s", request.mode, request.settings.keep, request.settings.positions)
        worker = self._host.submit(
            f"{request.mode} run",
            lambda engine, ctx: engine.stream(
                document=request.document,
                question=request.question,
                mode=request.mode,
                settings=request.settings,
                cancel=ctx.cancel,
            ),
        )
        worker.event.connect(self._on_event)
        worker.finished.connect(lambda _result: self.ended.emit(FINISHED, ""))
        worker.cancelled.connect(lambda: self.ended.emit(CANCELLED, ""))
        worker.failed.connect(lambda message: self.ended.emit(FAILED, message))
        self._worker = worker
        self.started.emit(request)
        return True

    def cancel(self) -> None:
        if self.is_active:
            self._worker.cancel()

    def _on_event(self, event: object) -> None:
        if isinstance(event, RunFinished):
            self._results[event.result.run] = event.result
        self.event.emit(event)
