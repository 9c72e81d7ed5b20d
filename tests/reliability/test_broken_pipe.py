"""`specprefill run … | head -c 1`: when stdout's reader goes away mid-answer, the CLI ends at once,
quietly, with exit 0 or 141 (128 + SIGPIPE), as shell tools do.

The reader here is gone before the first token (the read end of the pipe is closed from the
start), so the first token's write fails while the answer stream holds the target: the case that
used to leave `close()` waiting on the target's lock forever.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.tiny_gguf import write_tiny_pair

QUIET_EXITS = (0, 141)
DEADLINE_S = 120  # loading the tiny models takes seconds; a hang is what fails


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    home = tmp_path_factory.mktemp("pipe")
    target, draft = write_tiny_pair(home / "models")
    doc = home / "doc.txt"
    doc.write_text(" ".join(f"Item {i} is the {['red', 'blue'][i % 2]} stone." for i in range(30)))
    env = dict(os.environ, XDG_CACHE_HOME=str(home / "cache"), HF_HUB_OFFLINE="1")
    models = ["--target", str(target), "--draft", str(draft), "--threads", "1", "--n-ctx", "1024"]
    return env, models, doc


def run_with_reader_gone(args: list[str], env: dict, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe nobody reads: its read end is closed before the CLI starts."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "engine.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            input=stdin,
            env=env,
            text=True,
            timeout=DEADLINE_S,
            cwd=Path(__file__).parents[2],
        )
    finally:
        os.close(write_end)


def test_run_ends_quietly_when_its_reader_goes_away(cli):
    env, models, doc = cli
    proc = run_with_reader_gone(
        [
            "run",
            "--doc",
            str(doc),
            "--question",
            "Which item is red?",
            "--mode",
            "baseline",
            "--max-new-tokens",
            "200",
            *models,
        ],
        env,
    )
    assert proc.returncode in QUIET_EXITS, proc.stderr
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr


def test_chat_ends_quietly_when_its_reader_goes_away(cli):
    env, models, doc = cli
    proc = run_with_reader_gone(
        ["chat", "--doc", str(doc), "--mode", "baseline", "--max-new-tokens", "200", *models],
        env,
        stdin="Which item is red?\nWhich item is blue?\n",
    )
    assert proc.returncode in QUIET_EXITS, proc.stderr
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr, proc.stderr
