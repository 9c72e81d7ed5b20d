"""Run a blocking job or a generator on a thread pool and report back through Qt signals.

A job is a callable taking a WorkerContext. It may return a value, or an iterator
whose items are forwarded one by one as `event` signals (engine event streams).
The pool thread emits on a private relay; the Worker, which lives on the GUI
thread, re-emits on its public signals. So every public signal arrives on the
GUI thread, whatever kind of slot (lambda, method) is connected to it.

A failure crosses the thread as the exception object itself: the GUI acts on its type
(a password prompt, an offer to re-assemble the models), never on its words.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from engine.api import Cancelled, CancelToken, SpecPrefillError

log = logging.getLogger(__name__)

# Workers stay referenced here until they end, so nobody has to hold them just to keep them alive.
_RUNNING: set[Worker] = set()


@dataclass(frozen=True)
class WorkerContext:
    """What a job gets: the token to honour and a way to send an event to the GUI."""

    cancel: CancelToken
    emit: Callable[[object], None]


Job = Callable[[WorkerContext], object]


class _Relay(QObject):
    """Signals emitted from the pool thread; queued to the Worker on the GUI thread."""

    event = Signal(object)
    finished = Signal(object)
    failed = Signal(object)  # the exception
    cancelled = Signal()


class _Runnable(QRunnable):
    def __init__(self, job: Job, context: WorkerContext, relay: _Relay, name: str) -> None:
        super().__init__()
        self._job = job
        self._context = context
        self._relay = relay
        self._name = name

    def run(self) -> None:
        cancel = self._context.cancel
        try:
            cancel.raise_if_cancelled()  # cancelled while still queued
            result = self._job(self._context)
            if isinstance(result, Iterator):
                result = self._drain(result)
        except Exception as e:
            if (
                isinstance(e, Cancelled) or cancel.cancelled
            ):  # whatever broke after Cancel, the user asked to stop
                self._relay.cancelled.emit()
            else:
                self._report_failure(e)
            return
        if cancel.cancelled:
            self._relay.cancelled.emit()
        else:
            self._relay.finished.emit(result)

    def _report_failure(self, e: Exception) -> None:
        if isinstance(e, SpecPrefillError):
            log.warning("%s failed: %s", self._name, e)
        else:  # a bug or a runtime fault: the log gets the traceback, the user one line
            log.error("%s crashed", self._name, exc_info=e)
        # Without its traceback the exception no longer holds the job's frames (documents, models) alive.
        self._relay.failed.emit(e.with_traceback(None))

    def _drain(self, events: Iterator) -> object:
        """Forward every item; stop at once when cancelled, even if the generator would go on."""
        cancel = self._context.cancel
        try:
            while True:
                try:
                    item = next(events)
                except StopIteration as stop:
                    return stop.value
                cancel.raise_if_cancelled()
                self._relay.event.emit(item)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()


class Worker(QObject):
    """One job on a pool thread. Exactly one of finished/failed/cancelled fires, then `ended`."""

    event = Signal(object)
    finished = Signal(object)
    failed = Signal(object)  # the exception the job raised: a SpecPrefillError, or a bug's
    cancelled = Signal()
    ended = Signal()

    def __init__(self, job: Job, *, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.token = CancelToken()
        self._active = False
        self._relay = _Relay()
        self._relay.event.connect(self._on_event)
        self._relay.finished.connect(self._on_finished)
        self._relay.failed.connect(self._on_failed)
        self._relay.cancelled.connect(self._on_cancelled)
        context = WorkerContext(cancel=self.token, emit=self._relay.event.emit)
        self._runnable: _Runnable | None = _Runnable(job, context, self._relay, name)

    @property
    def active(self) -> bool:
        return self._active

    def start(self, pool: QThreadPool) -> Worker:
        runnable, self._runnable = self._runnable, None
        if runnable is None:
            raise RuntimeError(f"{self.name} was already started")
        self._active = True
        _RUNNING.add(self)
        pool.start(runnable)  # the pool owns and deletes the runnable once it has run
        return self

    def cancel(self) -> None:
        self.token.cancel()

    @Slot(object)
    def _on_event(self, item: object) -> None:
        if not self.token.cancelled:  # after Cancel the panes must stop changing
            self.event.emit(item)

    @Slot(object)
    def _on_finished(self, result: object) -> None:
        if self.token.cancelled:  # the job beat the Cancel click by a hair: the user still asked to stop
            self._on_cancelled()
            return
        self._end(self.finished, result)

    @Slot(object)
    def _on_failed(self, error: Exception) -> None:
        self._end(self.failed, error)

    @Slot()
    def _on_cancelled(self) -> None:
        log.info("%s cancelled", self.name)
        self._end(self.cancelled)

    def _end(self, signal, *args) -> None:
        # Inactive before anyone hears of the end, so handlers may start the next job at once.
        self._active = False
        _RUNNING.discard(self)
        signal.emit(*args)
        self.ended.emit()


def make_pool(max_threads: int) -> QThreadPool:
    pool = QThreadPool()
    pool.setMaxThreadCount(max_threads)
    return pool
