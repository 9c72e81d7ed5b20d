"""Who has the models: one request at a time, and background work (the target's full fill, the
draft's read-ahead) only between requests, giving them up the moment a request asks."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from engine.core.cancel import CancelToken
from engine.core.errors import EngineBusyError


class TargetLocks:
    """The foreground lock (a request runs), the target lock (the models compute: a request, or one
    background batch or chunk) and the running background jobs' preempt tokens."""

    def __init__(self) -> None:
        self._foreground = threading.Lock()
        self.target = threading.Lock()
        self._preempt_guard = threading.Lock()
        self._preempts: set[CancelToken] = set()  # each running background job's "a request needs the target"
        self.closed = False  # set under the target lock: a background batch never computes on freed memory

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """One request at a time; a background fill gives the target up at once (its current
        llama.cpp batch aborts, and the next call resumes from the batch before)."""
        if not self._foreground.acquire(blocking=False):
            raise EngineBusyError("a run is already in progress on this engine; wait for it or cancel it")
        try:
            self.preempt_background()
            with self.target:
                yield
        finally:
            self._foreground.release()

    def preempt_background(self) -> None:
        with self._preempt_guard:
            for preempt in self._preempts:
                preempt.cancel()

    @contextmanager
    def background(self) -> Iterator[CancelToken]:
        """A preempt token for one background job, registered while it runs: a request cancels it."""
        preempt = CancelToken()
        with self._preempt_guard:
            self._preempts.add(preempt)
        try:
            yield preempt
        finally:
            with self._preempt_guard:
                self._preempts.discard(preempt)

    @contextmanager
    def background_turn(self, token: CancelToken) -> Iterator[bool]:
        """The target for one background batch: yields False (and computes nothing) when the fill was
        cancelled, a request has the target or waits for it, or the engine is closed."""
        if token.cancelled or not self.target.acquire(blocking=False):
            yield False
            return
        try:
            # a request may have come between the checks
            yield not (token.cancelled or self._foreground.locked() or self.closed)
        finally:
            self.target.release()
