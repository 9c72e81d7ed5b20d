"""Helpers shared by the reliability tests: the CLI run in this process, and its one-line contract."""

from __future__ import annotations

import signal
import time

import pytest

from engine.cli.main import main as cli_main
from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled
from engine.ingest import load_document


def run_cli(capsys, *args: str) -> tuple[int, list[str]]:
    """`specprefill ARGS` in this process; returns the exit code and the lines on stderr.

    main() installs its own Ctrl-C handler (it cancels the run); pytest's is put back after."""
    sigint = signal.getsignal(signal.SIGINT)
    try:
        code = cli_main(list(args))
    finally:
        signal.signal(signal.SIGINT, sigint)
    return code, capsys.readouterr().err.strip().splitlines()


def assert_one_error_line(code: int, lines: list[str], *needles: str) -> None:
    """Exit 2 and one error line, the last (progress lines such as "[load] ..." may come first)."""
    assert code == 2 and lines, lines
    assert [line for line in lines if line.startswith("specprefill:")] == lines[-1:], lines
    assert lines[-1].startswith("specprefill: error: ") and not any("Traceback" in line for line in lines)
    for needle in needles:
        assert needle in lines[-1], lines[-1]


def tiny_model_flags(target, draft, n_ctx: int = 512) -> list[str]:
    return ["--target", str(target), "--draft", str(draft), "--threads", "1", "--n-ctx", str(n_ctx)]


def seconds_to_stop_reading(path, cancel_at: int) -> float:
    """Read `path` and press Cancel when progress reaches step `cancel_at`: the seconds until the
    read gave up (with Cancelled, which the test requires)."""
    cancel = CancelToken()
    pressed: list[float] = []

    def progress(done, total, label):
        if done == cancel_at and not pressed:
            pressed.append(time.monotonic())
            cancel.cancel()

    with pytest.raises(Cancelled):
        load_document(path, cancel=cancel, progress=progress)
    return time.monotonic() - pressed[0]
