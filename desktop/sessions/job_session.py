"""What a run and an A/B suite share: one job at a time on the engine thread, cancel, how it ended.

A subclass builds the job and decides what its events and its result mean; this class
submits it to the engine host, refuses a second one, and reports the end as `ended`.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from desktop.model.failure_text import failure_text
from desktop.sessions.engine_host import EngineHost, EngineLike
from desktop.sessions.worker import Worker, WorkerContext

FINISHED, CANCELLED, FAILED = "finished", "cancelled", "failed"

EngineJob = Callable[[EngineLike, WorkerContext], object]


class EngineJobSession(QObject):
    started = Signal(object)  # the request
    ended = Signal(str, str)  # outcome (FINISHED, CANCELLED, FAILED), message (the error's, with its remedy)

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._host = host
        self._worker: Worker | None = None
        self._request: object | None = None

    @property
    def is_active(self) -> bool:
        return self._worker is not None and self._worker.active

    @property
    def request(self):
        """The current (or last) request."""
        return self._request

    def cancel(self) -> None:
        if self.is_active:
            self._worker.cancel()

    def _start(
        self, request: object, name: str, job: EngineJob, *, preempts_background: bool = False
    ) -> bool:
        """Submit `job`; refused (False) while a job of this session is active or without an engine.
        `preempts_background`: see EngineHost.submit."""
        if self.is_active or not self._host.is_ready:
            return False
        self._request = request
        self._forget_results()
        worker = self._host.submit(name, job, preempts_background=preempts_background)
        worker.event.connect(self._on_event)
        worker.finished.connect(self._on_finished)
        worker.cancelled.connect(lambda: self.ended.emit(CANCELLED, ""))
        worker.failed.connect(lambda error: self.ended.emit(FAILED, failure_text(error, name)))
        self._worker = worker
        self.started.emit(request)
        return True

    # --- for subclasses ---------------------------------------------------------------------------

    def _forget_results(self) -> None:
        """Drop what the previous job left; called once a new job is accepted."""

    def _on_event(self, event: object) -> None:
        """One item the job yielded."""

    def _on_finished(self, result: object) -> None:
        self.ended.emit(FINISHED, "")
