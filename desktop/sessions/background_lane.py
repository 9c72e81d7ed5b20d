"""The engine's background work (the draft's read-ahead, the full prefill) on the engine's own
thread driver, engine.api.BackgroundThread, with its events brought to the GUI thread.

BackgroundThread hands each event to a callback on its thread; the lane emits it there on a
private signal, which Qt queues to this QObject on the GUI thread, and re-emits it on `event`.
So every public signal arrives on the GUI thread. After the work's last event comes `ended`,
with how it ended on the job: cancelled (Cancel was asked; events after it are dropped, as
a Worker drops them), failed (`error`), or finished.

One piece of work at a time: starting one cancels the one under way, and it runs once that
one has ended, so the GUI thread never waits for a batch. The engine thread can wait until no
background work holds the engine (`wait_idle`): the host's other jobs do, before they start.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, Slot

from engine.api import BackgroundThread, BackgroundWork, CancelToken, SpecPrefillError

log = logging.getLogger(__name__)


@dataclass(eq=False)
class BackgroundJob:
    """One piece of background work; how it ended is set before the lane's `ended` fires."""

    name: str
    active: bool = True
    cancelled: bool = False  # Cancel was asked: its later events are dropped
    error: Exception | None = None  # what it raised (without its traceback); None if it did not


@dataclass(frozen=True)
class _Ended:
    """The last item of every job: after the work's own events, whatever happened."""

    error: Exception | None


class BackgroundLane(QObject):
    event = Signal(object, object)  # the job, one event its work yielded
    ended = Signal(object)  # the job, once its work has ended
    _arrived = Signal(object, object)  # emitted on the background thread, queued to the GUI thread

    def __init__(self, parent: QObject | None = None, name: str = "background-prefill") -> None:
        super().__init__(parent)
        self._arrived.connect(self._deliver)
        self._driver = BackgroundThread(lambda item: self._arrived.emit(*item), name=name)
        self._job: BackgroundJob | None = None
        self._running: BackgroundJob | None = None  # the job last handed to the driver
        self._pending: deque[tuple[BackgroundJob, BackgroundWork, int]] = deque()  # after the running one
        self._lock = threading.Lock()
        self._latest = 0  # the serial of the latest job started: only it says the lane is idle
        self._idle = threading.Event()
        self._idle.set()

    @property
    def active(self) -> bool:
        """The latest job has not ended yet."""
        return self._job is not None and self._job.active

    def start(self, name: str, work: BackgroundWork) -> BackgroundJob:
        """Run work(cancel) on the background thread, once the job under way (cancelled now) has ended."""
        self.cancel()
        job = self._job = BackgroundJob(name)
        with self._lock:
            self._latest += 1
            self._idle.clear()
            self._pending.append((job, work, self._latest))
        if self._running is None or not self._running.active:  # else once it has said it ended
            self._launch()
        return job

    def cancel(self, job: BackgroundJob | None = None) -> None:
        """Cancel the latest job (or `job`, if it is the latest): its work stops at its next check."""
        if self.active and job in (None, self._job):
            self._job.cancelled = True
            self._driver.stop(0)  # cancels without waiting

    def wait(self, timeout_s: float) -> bool:
        """On the GUI thread: whether no work runs or waits to, after waiting up to `timeout_s`."""
        return self._driver.wait(timeout_s) and not self._pending

    def wait_idle(self) -> None:
        """On the engine thread: until no background work holds the engine."""
        self._idle.wait()

    def _launch(self) -> None:
        job, work, serial = self._pending.popleft()
        self._running = job
        self._driver.start(
            self._tracked(job, work, serial)
        )  # the one before is past its last event: a short wait

    def _tracked(self, job: BackgroundJob, work: BackgroundWork, serial: int) -> BackgroundWork:
        """`work` with its job attached to each event, then _Ended; the lane is idle after the latest job."""

        def run(cancel: CancelToken) -> Iterator[object]:
            error = None
            try:
                if not job.cancelled:  # cancelled while it waited for the one before: nothing to do
                    for event in work(cancel):
                        yield job, event
            except Exception as exc:
                error = exc.with_traceback(None) if cancel.cancelled else _logged(job.name, exc)
            try:
                yield job, _Ended(error)
            finally:
                with self._lock:
                    if serial == self._latest:
                        self._idle.set()

        return run

    @Slot(object, object)
    def _deliver(self, job: BackgroundJob, item: object) -> None:
        if not isinstance(item, _Ended):
            if not job.cancelled:  # after Cancel the status bar must stop changing
                self.event.emit(job, item)
            return
        job.active = False  # before anyone hears of the end, so a handler may start the next job
        job.error = None if job.cancelled else item.error  # whatever broke after Cancel, it was asked to stop
        if job is self._running and self._pending:
            self._launch()
        self.ended.emit(job)


def _logged(name: str, error: Exception) -> Exception:
    if isinstance(error, SpecPrefillError):
        log.warning("%s failed: %s", name, error)
    else:  # a bug or a runtime fault: the log gets the traceback, the user one line
        log.error("%s crashed", name, exc_info=error)
    return error.with_traceback(None)
