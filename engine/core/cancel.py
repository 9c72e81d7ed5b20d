"""A thread-safe cancel flag shared by the GUI, the CLI and the engine loops."""

from __future__ import annotations

import threading

from engine.core.errors import Cancelled


class CancelToken:
    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()


NEVER = CancelToken()  # a token nobody cancels, for callers without a Cancel button
