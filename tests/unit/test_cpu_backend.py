"""The portable CPU build: several variants in the wheel, one loaded, the AMX self-test's fallback.

Each check runs in a child process (`python -P`): a process registers its llama.cpp backends
once, so the variant or the fallback must be chosen in a fresh one.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from engine.llama import cpu_backend
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf

REPO = Path(__file__).resolve().parents[2]
X86 = platform.machine().lower() in ("x86_64", "amd64")

# Loads the backend as the app does, decodes with the tiny model, prints the CPU path as JSON.
# `amx` names the variant that counts as an AMX one here, so that a machine without AMX takes
# the self-test path too.
CHILD = """
import json, sys
from pathlib import Path
import numpy as np
from engine.llama import cpu_backend, native
if sys.argv[2]:
    cpu_backend.AMX_VARIANTS = (sys.argv[2],)
    native._default_selftest_model = lambda: Path(sys.argv[1])
model = native.LlamaModel(Path(sys.argv[1]))
ctx = native.LlamaContext(model, n_ctx=64, n_batch=8, n_threads=1)
ok = ctx.decode(np.arange(1, 9, dtype=np.int32), np.arange(8, dtype=np.int32), True) == 0
print(json.dumps({**cpu_backend.as_record(native.cpu_path()), "decoded": ok}))
"""


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return write_tiny_qwen2_gguf(tmp_path_factory.mktemp("cpu") / "tiny.gguf")


def run_child(model: Path, tmp_path: Path, *, amx: str = "", **env: str) -> dict:
    full_env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), **env}
    proc = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(model), amx],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def best_variant() -> str:
    return cpu_backend.ranked_variants(cpu_backend.variant_libraries(cpu_backend.lib_dir()))[0]


@pytest.mark.skipif(not X86, reason="the variant set is x86-64's")
def test_the_installed_wheel_holds_several_cpu_variants():
    variants = cpu_backend.variant_libraries(cpu_backend.lib_dir())
    assert {"x64", "haswell", "skylakex", "sapphirerapids"} <= set(variants)
    assert "x64" in cpu_backend.ranked_variants(
        cpu_backend.variant_libraries(cpu_backend.lib_dir())
    )  # the baseline runs anywhere


def test_the_driver_loads_one_variant_and_decodes(tiny_model, tmp_path):
    record = run_child(tiny_model, tmp_path)
    assert record["decoded"] and record["variant"] == best_variant()


@pytest.mark.skipif(not X86, reason="the variant set is x86-64's")
def test_the_variant_override_is_honoured(tiny_model, tmp_path):
    record = run_child(tiny_model, tmp_path, SPECPREFILL_CPU_VARIANT="x64")
    assert record["decoded"] and record["variant"] == "x64" and record["verdict"].startswith("forced")


def test_an_unknown_variant_is_refused_with_the_ones_there(tmp_path, monkeypatch):
    monkeypatch.setenv(cpu_backend.VARIANT_ENV, "pentium3")
    with pytest.raises(RuntimeError, match="pentium3: this build has .*x64"):
        cpu_backend.choose_cpu_path(cpu_backend.lib_dir(), None)


def test_extra_buffers_can_be_turned_off(tiny_model, tmp_path):
    record = run_child(tiny_model, tmp_path, SPECPREFILL_EXTRA_BUFTS="0")
    assert record["decoded"] and record["extra_bufts"] is False


def test_a_selftest_that_dies_of_sigsegv_falls_back_and_is_cached(tiny_model, tmp_path):
    # Stands in for an AMX machine: the self-test's child kills itself, the process that asked
    # survives, loads without extra buffer types and decodes; the verdict is written once.
    best = best_variant()
    record = run_child(tiny_model, tmp_path, amx=best, SPECPREFILL_SELFTEST_CRASH="1")
    assert record["decoded"] and record["variant"] == best and record["extra_bufts"] is False
    assert "SIGSEGV" in record["verdict"] and record["tested_at"]
    verdicts = json.loads((tmp_path / "cache" / "specprefill" / "cpu-selftest.json").read_text())
    assert [v["passed"] for v in verdicts.values()] == [False]
    again = run_child(tiny_model, tmp_path, amx=best)  # cached: no new self-test, same verdict
    assert again["verdict"] == record["verdict"] and again["extra_bufts"] is False


def test_a_selftest_that_passes_keeps_extra_buffers(tiny_model, tmp_path):
    record = run_child(tiny_model, tmp_path, amx=best_variant())
    assert record["decoded"] and record["verdict"] == "passed" and record["extra_bufts"] is True


def test_without_a_model_to_test_with_the_amx_buffers_stay_off(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_backend, "AMX_VARIANTS", (best_variant(),))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path, library = cpu_backend.choose_cpu_path(cpu_backend.lib_dir(), None)
    assert library is not None and path.extra_bufts is False and path.verdict.startswith("not run")


@pytest.mark.slow
def test_doctor_names_the_cpu_variant(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "engine.cli", "doctor"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    line = next(line for line in proc.stdout.splitlines() if "cpu variant:" in line)
    assert best_variant() in line and "self-test:" in line


def test_the_engine_and_its_reports_record_the_cpu_path(engine):
    from engine.eval.bench import bench_report

    assert engine.info.cpu_path.startswith(f"cpu variant: {best_variant()}")
    report = bench_report([], 0.2, "doc", engine.info).to_json()
    assert report["models"]["cpu_path"] == engine.info.cpu_path
