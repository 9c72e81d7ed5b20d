"""The one engine behind a bounded queue: a thread answers the requests one at a time, in order.

A request waits in the queue (at most `capacity` requests running and waiting: more are refused,
429); its events go back to the event loop that asked (Job.put). Each has its own cancel token:
a client gone, or a shutdown, cancels it, queued or running (the engine checks the token at every
batch and token). Conversations about one document share a DocumentSession, so a later turn
reuses the cached prefixes (served_by). While idle, the latest document's full prefix is filled
in the background (setting background_prefill), as `specprefill chat` does; a request preempts it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from engine.api import CancelToken, DocumentSession, Notice, RunFinished, RunSettings, TokenGenerated
from engine.serve.metrics import Metrics

log = logging.getLogger("specprefill.serve")
END = object()  # the last item of every job
SESSIONS_KEPT = 8  # documents whose sessions (and so their cached prefixes' records) are kept


class QueueFull(Exception):
    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"the server is busy; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class ShuttingDown(Exception):
    pass


@dataclass
class Job:
    document: str
    question: str
    mode: str
    settings: RunSettings
    loop: asyncio.AbstractEventLoop
    items: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancel: CancelToken = field(default_factory=CancelToken)

    def put(self, item: Any) -> None:
        """From the worker thread: hand an item (a token's text, the RunResult, an error, END) to the loop."""
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            pass


class BackgroundFill:
    """Engine.background_prefill on a thread of its own while the queue is empty."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.cancel = CancelToken()
        self.thread: threading.Thread | None = None

    def start(self, session: DocumentSession, settings: RunSettings) -> None:
        self.wait()
        if settings.background_prefill and self.engine.background_needed(session, settings):
            self.thread = threading.Thread(
                target=self._fill, args=(session, settings), daemon=True, name="background-prefill"
            )
            self.thread.start()

    def _fill(self, session: DocumentSession, settings: RunSettings) -> None:
        try:
            for event in self.engine.background_prefill(session, settings, self.cancel):
                if getattr(event, "status", ""):
                    log.info(
                        "background full prefill %s (%d/%d tokens)", event.status, event.done, event.total
                    )
        except Exception:  # the fill is an optimisation: a failure leaves the answers as they were
            log.exception("background full prefill failed")

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def stop(self) -> None:
        self.cancel.cancel()
        self.wait()


class EngineWorker:
    def __init__(
        self, engine, capacity: int, metrics: Metrics | None = None, background: bool = True
    ) -> None:
        self.engine, self.capacity, self.metrics = engine, capacity, metrics or Metrics()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._lock = threading.Lock()
        self._pending = 0  # running and waiting
        self._running: Job | None = None
        self._closing = False
        self._sessions: OrderedDict[str, DocumentSession] = OrderedDict()
        self._fill = BackgroundFill(engine) if background else None
        self._seconds = 0.0  # a moving average of how long an answer takes, for Retry-After
        self._thread = threading.Thread(target=self._serve, name="engine-worker", daemon=True)
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
    def _serve(self) -> None:
        while (job := self._queue.get()) is not None:
            self._running = job
            start = time.perf_counter()
            try:
                if not job.cancel.cancelled:
                    self._answer(job)
            finally:
                self._running = None
                with self._lock:
                    self._pending -= 1
                    fill = self._pending == 0 and not self._closing and not job.cancel.cancelled
                self._note_seconds(time.perf_counter() - start)
                job.put(END)
            if fill and self._fill is not None:
                self._fill.start(self._session_for(job), job.settings)

    def _note_seconds(self, seconds: float) -> None:
        self._seconds = 0.7 * self._seconds + 0.3 * seconds if self._seconds else seconds

    def _answer(self, job: Job) -> None:
        events = iter(())
        try:
            events = self.engine.ask(self._session_for(job), job.question, job.mode, job.settings, job.cancel)
            for event in events:
                if isinstance(event, TokenGenerated):
                    job.put(event.text)
                elif isinstance(event, RunFinished):
                    r = event.result
                    self.metrics.record_answer(
                        r.ttft_s,
                        r.served_by or r.run,
                        None if r.run == "baseline" or r.bypassed else r.kept_fraction,
                    )
                    job.put(r)
                elif isinstance(event, Notice):
                    log.info("notice: %s", event.message)
        except Exception as exc:  # the client gets it as an error object
            job.put(exc)
        finally:
            getattr(events, "close", lambda: None)()

    def _session_for(self, job: Job) -> DocumentSession:
        """The session of this document and system prompt: the same one for every turn about it."""
        key = hashlib.sha256(f"{job.settings.system_prompt}\0{job.document}".encode()).hexdigest()
        session = self._sessions.pop(key, None) or DocumentSession(job.document)
        self._sessions[key] = session
        while len(self._sessions) > SESSIONS_KEPT:
            self._sessions.popitem(last=False)
        return session


def job_for(request, loop: asyncio.AbstractEventLoop) -> Job:
    """A worker job for a parsed chat request (engine.serve.body.ChatRequest)."""
    c = request.conversation
    return Job(c.document, c.question, request.mode, replace(request.settings), loop)
