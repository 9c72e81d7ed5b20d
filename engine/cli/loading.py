"""Loading the engine from the command line, with progress on stderr and a Ctrl-C that works.

While the engine runs, Ctrl-C sets the cancel token and every stage stops at its next check
(llama.cpp's abort callback included). Loading is mostly one long library call (reading,
dequantizing, quantizing weights) with no such checks, so there Ctrl-C interrupts at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from engine import api
from engine.cli.options import model_settings_from
from engine.core.cancel import CancelToken

if TYPE_CHECKING:
    from engine.api import Engine


class CtrlC:
    """SIGINT handler: the first press cancels the token; a second press, or one while
    `interrupting()` is active, raises KeyboardInterrupt at once."""

    def __init__(self, cancel: CancelToken) -> None:
        self.cancel = cancel
        self.interrupt_now = False

    def __call__(self, signum, frame) -> None:
        if self.interrupt_now or self.cancel.cancelled:
            raise KeyboardInterrupt
        self.cancel.cancel()

    def install(self) -> None:
        signal.signal(signal.SIGINT, self)

    @contextmanager
    def interrupting(self) -> Iterator[None]:
        previous, self.interrupt_now = self.interrupt_now, True
        try:
            yield
        finally:
            self.interrupt_now = previous


_handler: CtrlC | None = None


def install_ctrl_c(cancel: CancelToken) -> CtrlC:
    global _handler
    _handler = CtrlC(cancel)
    _handler.install()
    return _handler


@contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Inside this block Ctrl-C raises KeyboardInterrupt (no-op when no handler is installed)."""
    if _handler is None:
        yield
        return
    with _handler.interrupting():
        yield


def print_progress(tag: str):
    """A progress callback that prints a line per label and per 10%."""
    last: dict = {"label": None, "pct": -1}

    def report(done: int, total: int, label: str) -> None:
        pct = int(100 * done / total) if total else 100
        if label != last["label"] or pct >= last["pct"] + 10:
            print(f"[{tag}] {label}: {pct}%", file=sys.stderr, flush=True)
            last.update(label=label, pct=pct)

    return report


def load_engine(args: argparse.Namespace, cancel: CancelToken, quiet: bool) -> Engine:
    settings = model_settings_from(args)

    def progress(done: int, total: int, label: str) -> None:
        if not quiet:
            print(f"[load] {label}", file=sys.stderr, flush=True)

    with ctrl_c_interrupts():
        return api.load_engine(settings, progress=progress, cancel=cancel)
