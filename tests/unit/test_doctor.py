"""`specprefill doctor` and `--version` on both commands (contracts of the install issue)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.about import app_version
from tests.fixtures.tiny_gguf import write_tiny_pair

ROOT = Path(__file__).resolve().parents[2]
LINES = (
    "python:",
    "torch:",
    "llama.cpp:",
    "cpu:",
    "amx:",
    "precision:",
    "backends:",
    "target:",
    "draft:",
    "vocabulary:",
    "calibration:",
)


def run(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), HF_HUB_OFFLINE="1", QT_QPA_PLATFORM="offscreen")
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_doctor_reports_each_component_and_exits_0_when_the_app_can_run(tmp_path):
    target, draft = write_tiny_pair(tmp_path / "models")
    proc = run(
        ["-m", "engine.cli", "doctor", "--target", str(target), "--draft", str(draft)], tmp_path / "cache"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(LINES)
    llama = next(line for line in lines if line.startswith("llama.cpp:"))
    assert "restore positions supported" in llama and (
        "target: CPU (" in llama or "GPU offload: all" in llama
    )
    torch_line = next(line for line in lines if line.startswith("torch:"))
    assert "draft on " in torch_line and "free memory: " in torch_line and "RAM " in torch_line
    assert str(target) in proc.stdout and "none" in lines[-1]
    backends = next(line for line in lines if line.startswith("backends:"))
    assert backends.startswith("backends:     CPU (no RPC workers set; RPC backend ")


@pytest.mark.slow
def test_doctor_exits_2_with_one_line_when_a_default_model_is_missing(tmp_path):
    proc = run(["-m", "engine.cli", "doctor"], tmp_path / "empty-cache")
    assert proc.returncode == 2
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 1 and "missing" in errors[0] and "models --assemble" in errors[0]
    assert "(missing)" in proc.stdout  # the report itself still comes, line by line


@pytest.mark.parametrize(
    "command, name", [(["-m", "engine.cli"], "specprefill"), (["-m", "desktop.app"], "specprefill-gui")]
)
@pytest.mark.slow
def test_both_commands_print_their_version(tmp_path, command, name):
    proc = run([*command, "--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{name} {app_version()}" and app_version() != "unknown"
