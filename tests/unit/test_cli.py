"""CLI contract: usage and input errors are one line on stderr with exit code 2."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.options import comma_items, int_list, integers

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def assert_one_line_error(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert needle in lines[0]


@pytest.mark.slow
def test_missing_document(tmp_path):
    proc = run_cli("run", "--doc", str(tmp_path / "nope.pdf"), "--question", "q?")
    assert_one_line_error(proc, "nope.pdf")


@pytest.mark.slow
def test_random_bytes_pdf(tmp_path):
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(bytes(range(256)) * 40)
    assert_one_line_error(run_cli("run", "--doc", str(bad), "--question", "q?"), "bad.pdf")


@pytest.mark.slow
def test_keep_out_of_range(tmp_path):
    assert_one_line_error(run_cli("run", "--doc", "x", "--question", "q", "--keep", "1.5"), "keep")


@pytest.mark.slow
def test_unknown_positions_mode():
    assert_one_line_error(run_cli("run", "--doc", "x", "--question", "q", "--positions", "gap"), "positions")


def test_comma_lists_drop_blanks_and_refuse_non_integers():
    assert comma_items(" summary, count,,") == ["summary", "count"]
    assert integers("10, 50,") == [10, 50]
    assert int_list("2048,4096") == [2048, 4096]
    with pytest.raises(argparse.ArgumentTypeError, match="comma-separated integers"):
        integers("10,half")
    with pytest.raises(argparse.ArgumentTypeError, match="at least 64"):
        int_list("32")
