"""packaging/gpu_check.sh, the prepared script for a lent GPU machine, in its dry mode: every step
it would run is named, with the flags it uses, and what it needs exists, with no GPU here; and the
one result file it writes, from generated step outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "packaging"))  # as test_setup_tools.py does: packaging/ is no package

from gpu_check_report import report  # noqa: E402


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


def gpu_check_report(out: Path) -> dict:
    return json.loads((out / "gpu-check.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_dry_run_writes_the_one_result_file_with_every_step(tmp_path):
    done = dry_run(tmp_path)
    assert done.returncode == 0, done.stderr
    result = gpu_check_report(tmp_path / "out")
    assert result["dry_run"] is True and result["passed"] is True
    assert [step["name"] for step in result["steps"]] == [
        "device tests",
        "doctor",
        "draft memory",
        "bench on cuda",
    ]
    assert all(step["exit"] == "dry" for step in result["steps"])
    bench = result["steps"][-1]
    assert "--device cuda" in bench["command"] and "--lengths 8192,32768" in bench["command"]
    assert result["bench"] is None and result["gpus"] is None  # nothing ran, and it says so


@pytest.mark.slow
def test_the_steps_share_one_budget(tmp_path):
    done = dry_run(tmp_path, BUDGET_S="100")
    assert done.returncode == 0, done.stderr
    limits = [step["limit_s"] for step in gpu_check_report(tmp_path / "out")["steps"]]
    # the device tests' own limit is 150 s; the budget counts from the script's start
    assert 0 < limits[0] <= 100 and all(limit <= 100 for limit in limits)


def test_the_report_gathers_what_the_steps_wrote(tmp_path):
    (tmp_path / "gpu.csv").write_text("NVIDIA H100 80GB HBM3, 81559 MiB, 550.54.15\n")
    (tmp_path / "steps.tsv").write_text(
        "device tests\t150\t0\t41\tpython -m pytest\nbench on cuda\t240\t124\t240\tpython -m engine.cli bench\n"
    )
    (tmp_path / "device-tests.xml").write_text(
        '<testsuites><testsuite tests="12" failures="0" errors="0" skipped="2"/></testsuites>'
    )
    (tmp_path / "draft-memory.json").write_text('{"runs": [{"tokens": 8192, "peak_allocated_mib": 1443.8}]}')
    (tmp_path / "bench-cuda.json").write_text("{truncated")
    (tmp_path / "models.txt").write_text("the default models\n")
    result = report(tmp_path, dry_run=False)
    assert result["gpus"] == [
        {"name": "NVIDIA H100 80GB HBM3", "memory_total": "81559 MiB", "driver": "550.54.15"}
    ]
    assert result["steps"][1] == {
        "name": "bench on cuda",
        "limit_s": 240,
        "exit": 124,
        "seconds": 240,
        "command": "python -m engine.cli bench",
    }
    assert result["passed"] is False  # the bench ran out of time
    assert result["device_tests"] == {"tests": 12, "failures": 0, "errors": 0, "skipped": 2}
    assert result["draft_memory"]["runs"][0]["peak_allocated_mib"] == 1443.8
    assert "not JSON" in result["bench"]["error"] and result["models"] == "the default models"
