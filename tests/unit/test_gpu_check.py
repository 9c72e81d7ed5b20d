"""packaging/gpu_check.sh, the prepared script for a lent GPU machine, in its dry mode: every step
it would run is named, with the flags it uses, and what it needs exists, with no GPU here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def dry_run(tmp_path: Path, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable, **env}
    return subprocess.run(
        ["bash", "packaging/gpu_check.sh", "--dry-run"],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_dry_run_names_every_step_with_its_command(tmp_path):
    done = dry_run(tmp_path)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr  # the bench step's stderr goes to a file, shown by its tail
    for step in ("device tests", "doctor", "draft memory", "bench on cuda"):
        assert f"== {step}" in said
    assert "--lengths 8192,32768" in said and "--device cuda" in said
    assert "research/gpu/draft_memory.py --json" in said and "dry run" in said


@pytest.mark.slow
def test_the_dry_run_fails_on_a_missing_document(tmp_path):
    done = dry_run(tmp_path, DOC="resources/samples/docs/no-such.pdf")
    assert done.returncode == 1 and "no-such.pdf is missing" in done.stderr
