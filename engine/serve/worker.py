"""The one engine behind a bounded queue: a thread answers the requests one at a time, in order.

A request waits in the queue (at most `capacity` requests running and waiting: more are refused,
429); its events go back to the event loop that asked (Job.put). Each has its own cancel token:
a client gone, or a shutdown, cancels it, queued or running (the engine checks the token at every
batch and token). Conversations about one document share a DocumentSession (engine.serve.sessions),
so a later turn reuses the cached prefixes (served_by). While idle, the latest document's full
prefix is filled in the background (setting background_prefill); a request preempts it.

No request can stop the thread: everything it does for a job is inside one guard, and the thread
itself is supervised. Should it end anyway, it is started again, and `healthy` is False (GET
/health answers 503) until it is back.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from engine.api import (
    BackgroundEnded,
    BackgroundThread,
    CancelToken,
    Notice,
    RunFinished,
    RunSettings,
    TokenGenerated,
    background_work,
)
from engine.serve.metrics import Metrics
from engine.serve.sessions import SessionStore
from engine.serve.stops import StopScanner

log = logging.getLogger("specprefill.serve")
END = object()  # the last item of every job
RESTART_PAUSE_S = 0.2  # between a failure of the thread and its restart: no busy loop on a fault


class QueueFull(Exception):
    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"the server is busy; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class ShuttingDown(Exception):
    pass


@dataclass
class Job:
    """One request's work. Its items, in order: answer text (cut at a stop sequence on the worker's
    thread), then the RunResult or an exception, then END; `stopped` says a stop sequence ended it."""

    document: str
    question: str
    mode: str
    settings: RunSettings
    loop: asyncio.AbstractEventLoop
    stops: tuple[str, ...] = ()
    items: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancel: CancelToken = field(default_factory=CancelToken)
    enough: CancelToken = field(default_factory=CancelToken)  # a stop sequence cut it: end the answer
    stopped: bool = False

    def put(self, item: Any) -> None:
        """From the worker thread: hand an item to the loop."""
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            pass


def log_background(event: object) -> None:
    if isinstance(event, BackgroundEnded):
        log.info("background full prefill %s (%d/%d tokens)", event.status, event.done, event.total)


class EngineWorker:
    def __init__(
        self,
        engine,
        capacity: int,
        metrics: Metrics | None = None,
        background: bool = True,
        sessions: SessionStore | None = None,
    ) -> None:
        self.engine, self.capacity, self.metrics = engine, capacity, metrics or Metrics()
        self.sessions = sessions or SessionStore()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._pending = 0  # running and waiting
        self._running: Job | None = None
        self._closing = False
        self._healthy = True
        self.restarts = 0  # times the worker's loop failed and was started again
        self._fill = BackgroundThread(log_background) if background else None
        self._seconds = 0.0  # a moving average of how long an answer takes, for Retry-After
        self._thread = threading.Thread(target=self._supervise, name="engine-worker", daemon=True)
        self._thread.start()

    # -- the event loop's side ------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._lock:
            if self._closing:
                raise ShuttingDown("the server is shutting down")
            if self._pending >= self.capacity:
                raise QueueFull(self.retry_after_s())
            self._pending += 1
        self._queue.put(job)

    def retry_after_s(self) -> int:
        return max(1, round(self._seconds or 1.0))

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def healthy(self) -> bool:
        """The thread is there and its loop is running (False while it restarts after a failure)."""
        return self._healthy and self._thread.is_alive()

    @property
    def running(self) -> int:
        return 1 if self._running is not None else 0

    @property
    def waiting(self) -> int:
        return max(0, self._pending - self.running)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Refuse new requests, cancel the queued and running ones, and wait for the thread."""
        with self._lock:
            self._closing = True
        running = self._running
        if running is not None:
            running.cancel.cancel()
        for job in list(self._queue.queue):
            if job is not None:
                job.cancel.cancel()
        self._queue.put(None)
        if self._fill is not None:
            self._fill.stop()
        self._thread.join(timeout_s)

    # -- the worker thread ------------------------------------------------------------
    def _supervise(self) -> None:
        """Run the loop; should it fail (a fault no job's guard caught), log it and run it again."""
        while True:
            try:
                self._serve()
                return  # the queue's end: stop() asked for it
            except BaseException:
                self._healthy = False
                self.restarts += 1
                log.exception("the engine worker failed; starting it again")
                time.sleep(RESTART_PAUSE_S)
                self._healthy = True

    def _serve(self) -> None:
        while (job := self._queue.get()) is not None:
            self._running = job
            start = time.perf_counter()
            try:
                if not job.cancel.cancelled:
                    self._answer(job)
            except BaseException as exc:  # the client gets it as an error object, and the loop goes on
                log.exception("a request failed outside the engine")
                job.put(exc)
            finally:
                self._running = None
                with self._lock:
                    self._pending -= 1
                    idle = self._pending == 0 and not self._closing and not job.cancel.cancelled
                job.put(END)  # first: whatever fails after it, the client has its answer's end
                self._note_seconds(time.perf_counter() - start)
            if idle:
                self._fill_in_background(job)

    def _fill_in_background(self, job: Job) -> None:
        """The background full prefill of the job's document; a failure to start it is logged, not raised."""
        if self._fill is None:
            return
        try:
            session = self.sessions.session_for(job.document, job.settings.system_prompt)
            self._fill.start(background_work(self.engine, session, job.settings, read_ahead=False, fill=True))
        except Exception:
            log.exception("the background full prefill could not start")

    def _note_seconds(self, seconds: float) -> None:
        self._seconds = 0.7 * self._seconds + 0.3 * seconds if self._seconds else seconds

    def _answer(self, job: Job) -> None:
        events = iter(())
        scanner = StopScanner(job.stops)
        try:
            session = self.sessions.session_for(job.document, job.settings.system_prompt)
            events = self.engine.ask(
                session, job.question, job.mode, job.settings, job.cancel, enough=job.enough
            )
            for event in events:
                if isinstance(event, TokenGenerated):
                    if text := scanner.feed(event.text):
                        job.put(text)
                    if scanner.stopped:  # the engine ends the answer here, with its result
                        job.enough.cancel()
                elif isinstance(event, RunFinished):
                    if tail := scanner.flush():
                        job.put(tail)
                    job.stopped = scanner.stopped
                    self._record(event.result)
                    job.put(event.result)
                elif isinstance(event, Notice):
                    log.info("notice: %s", event.message)
        except Exception as exc:  # the client gets it as an error object
            job.put(exc)
        finally:
            getattr(events, "close", lambda: None)()

    def _record(self, r) -> None:
        self.metrics.record_answer(
            r.ttft_s, r.served_by or r.run, None if r.run == "baseline" or r.bypassed else r.kept_fraction
        )
