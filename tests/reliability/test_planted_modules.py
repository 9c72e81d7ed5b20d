"""Started from inside a hostile code folder, no process of ours imports the folder's modules.

The folder holds `engine/__init__.py`, `numpy.py`, `psutil.py` and `torch.py`, each of which writes
a marker when imported. `specprefill doctor --rpc` (which asks the worker over RPC from a child
process) and `specprefill run --rpc` (which runs the target in a host child process) run there
against a real loopback worker: no marker may appear.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.core.endpoints import Endpoint
from engine.llama.rpc.ggml_backends import has_rpc, lib_dir
from engine.llama.rpc.workers import RPC_SERVER, WorkerProcess, probe
from tests.fixtures.tiny_gguf import write_tiny_pair

pytestmark = pytest.mark.skipif(
    not (lib_dir() / RPC_SERVER).is_file() or not has_rpc(),
    reason="llama.cpp was built without RPC: packaging/build_llama_wheel.py --install",
)

PLANTED = ("engine/__init__.py", "numpy.py", "psutil.py", "torch.py")
SPECPREFILL = Path(sys.executable).with_name("specprefill")


def plant_modules(folder: Path, markers: Path) -> None:
    for name in PLANTED:
        module = folder / name
        module.parent.mkdir(parents=True, exist_ok=True)
        marker = markers / name.replace("/", "_")
        module.write_text(f"open({str(marker)!r}, 'w').write('imported from the current directory')\n")


@pytest.fixture
def hostile_cwd(tmp_path):
    folder, markers = tmp_path / "downloaded-repo", tmp_path / "markers"
    folder.mkdir()
    markers.mkdir()
    plant_modules(folder, markers)
    return folder, markers


@pytest.fixture
def worker(tmp_path, free_port):
    with WorkerProcess(Endpoint("127.0.0.1", free_port), threads=1, log=tmp_path / "worker.log") as started:
        started.wait_ready()
        yield started


PLANTED_BACKEND = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) { fputs("loaded from the current directory", f); fclose(f); }
}
"""


def imported(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def specprefill(cwd: Path, *args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(XDG_CACHE_HOME=str(cache), HF_HUB_OFFLINE="1")
    return subprocess.run(
        [str(SPECPREFILL), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_planted_modules_are_live_when_python_imports_from_the_cwd(hostile_cwd):
    """The fixture is armed: a plain `python -c 'import numpy'` in that folder writes the marker."""
    folder, markers = hostile_cwd
    subprocess.run([sys.executable, "-c", "import numpy"], cwd=folder, check=True, timeout=60)
    assert (markers / "numpy.py").exists()


def test_doctor_and_run_over_rpc_import_nothing_from_the_cwd(hostile_cwd, worker, tmp_path):
    folder, markers = hostile_cwd
    target, draft = write_tiny_pair(tmp_path / "models")
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(f"Item {i} is a {['red', 'blue'][i % 2]} stone." for i in range(30)))
    models = [
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--threads",
        "1",
        "--n-ctx",
        "1024",
        "--rpc",
        str(worker.endpoint),
    ]

    doctor = specprefill(folder, "doctor", *models, cache=tmp_path / "cache")
    assert imported(markers) == []
    assert f"{worker.endpoint}" in doctor.stdout and "lends" in doctor.stdout, doctor.stdout + doctor.stderr
    run = specprefill(
        folder,
        "run",
        "--doc",
        str(doc),
        "--question",
        "Which item is red?",
        "--mode",
        "spec",
        "--force",
        "--keep",
        "0.5",
        "--chunk-size",
        "8",
        "--max-new-tokens",
        "2",
        *models,
        cache=tmp_path / "cache",
    )
    assert imported(markers) == []
    assert run.returncode == 0, run.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build the planted library")
def test_a_worker_loads_no_ggml_backend_from_the_cwd(hostile_cwd, free_port):
    """ggml's backend loader scans the executable's folder and the current one for libggml-cpu-*.so:
    a library planted in the folder the worker is started from must not be loaded."""
    folder, markers = hostile_cwd
    source = folder / "planted.c"
    source.write_text(
        f"#define MARKER {json.dumps(str(markers / 'libggml-cpu-planted.so'))}\n" + PLANTED_BACKEND
    )
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(folder / "libggml-cpu-planted.so"), str(source)], check=True
    )
    endpoint = Endpoint("127.0.0.1", free_port)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    worker = subprocess.Popen(
        [str(SPECPREFILL), "worker", "--port", str(free_port), "--threads", "1"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while probe(endpoint, timeout=0.5) and time.monotonic() < deadline:
            assert worker.poll() is None, f"the worker exited with {worker.returncode}"
            time.sleep(0.1)
        assert not probe(endpoint), "the worker did not start listening"
    finally:
        worker.send_signal(signal.SIGINT)
        worker.wait(20)
    assert imported(markers) == []
