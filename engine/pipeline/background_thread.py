"""BackgroundThread: the one thread driver that `chat`, `serve` and the app run the engine's
background work on (the draft's read-ahead, then the full prefill of engine.pipeline.background_fill).
Cheap to import: the app's public API exports it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from engine.core.cancel import CancelToken
from engine.core.settings import RunSettings

if TYPE_CHECKING:
    from engine.pipeline.engine import Engine
    from engine.pipeline.session import DocumentSession

log = logging.getLogger(__name__)

BackgroundWork = Callable[[CancelToken], Iterable[object]]


def _ignore(_event: object) -> None:
    pass


class BackgroundThread:
    """Runs the engine's background work (read-ahead, full prefill) on a daemon thread of its own,
    one piece of work at a time: start(work) waits for the previous one, then runs work(cancel) and
    hands each event to on_event on that thread; stop() cancels the work under way and waits.

    A failure is logged, never raised: the background work is an optimisation, and the answers
    stay what they were without it."""

    def __init__(self, on_event: Callable[[object], None] = _ignore, name: str = "background-prefill"):
        self._on_event = on_event
        self._name = name
        self._cancel = CancelToken()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, work: BackgroundWork) -> None:
        """Run work(cancel) on the thread, after the previous work has ended."""
        self.wait()
        self._cancel = cancel = CancelToken()
        self._thread = threading.Thread(target=self._run, args=(work, cancel), name=self._name, daemon=True)
        self._thread.start()

    def _run(self, work: BackgroundWork, cancel: CancelToken) -> None:
        try:
            for event in work(cancel):
                self._on_event(event)
        except Exception:
            log.exception("the background work failed")

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the work under way; whether it has ended (False: timeout_s passed first)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                return False
            self._thread = None
        return True

    def stop(self, timeout_s: float | None = None) -> bool:
        """Cancel the work under way (its batch aborts) and wait for it; whether it has ended."""
        self._cancel.cancel()
        return self.wait(timeout_s)


def background_work(
    engine: Engine, session: DocumentSession, settings: RunSettings, *, read_ahead: bool, fill: bool
) -> BackgroundWork:
    """The work between questions, for BackgroundThread.start: the draft's read-ahead (when asked
    for and on in the settings), then the full prefill (when asked for and needed)."""

    def work(cancel: CancelToken) -> Iterator[object]:
        if read_ahead and settings.read_ahead:
            yield from engine.read_ahead(session, settings, cancel)
        if fill and not cancel.cancelled and engine.background_needed(session, settings):
            yield from engine.background_prefill(session, settings, cancel)

    return work
