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


class AnyCancel(CancelToken):
    """Cancelled as soon as any of its tokens is (the user's Cancel, or a run that takes over)."""

    def __init__(self, *tokens: CancelToken) -> None:
        super().__init__()
        self._tokens = (self, *tokens)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or any(token.cancelled for token in self._tokens[1:])

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled()
