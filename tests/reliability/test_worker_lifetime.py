"""`specprefill worker` killed with SIGKILL takes its llama.cpp rpc-server with it: the port is free
for a new worker within seconds (real processes on 127.0.0.1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from engine.core.endpoints import Endpoint
from engine.llama.rpc.ggml_backends import lib_dir
from engine.llama.rpc.workers import RPC_SERVER, probe

pytestmark = pytest.mark.skipif(
    not (lib_dir() / RPC_SERVER).is_file(),
    reason="llama.cpp was built without RPC: packaging/build_llama_wheel.py --install",
)

PORT_FREE_WITHIN_S = 5.0
START_TIMEOUT_S = 60.0


def start_worker(port: int, log) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "engine.cli", "worker", "--port", str(port), "--threads", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_listening(endpoint: Endpoint, proc: subprocess.Popen, timeout: float) -> float:
    """Seconds until the endpoint accepts connections; fails when the worker exits or never does."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert proc.poll() is None, f"the worker exited with {proc.returncode}"
        if not probe(endpoint, timeout=0.5):
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError(f"{endpoint} did not accept connections in {timeout:.0f} s")


def rpc_servers_of(pid: int) -> list[psutil.Process]:
    return [c for c in psutil.Process(pid).children(recursive=True) if c.cmdline()[0].endswith(RPC_SERVER)]


def is_gone(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_killed_worker_frees_its_port_for_the_next_one(free_port, tmp_path):
    endpoint = Endpoint("127.0.0.1", free_port)
    with open(tmp_path / "first.log", "wb") as log:
        first = start_worker(free_port, log)
    servers = []
    try:
        wait_listening(endpoint, first, START_TIMEOUT_S)
        servers = rpc_servers_of(first.pid)
        assert servers, "the worker runs llama.cpp's rpc-server as its child"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        killed_at = time.monotonic()
        while time.monotonic() - killed_at < PORT_FREE_WITHIN_S and not all(map(is_gone, servers)):
            time.sleep(0.05)
        assert all(map(is_gone, servers)), (
            f"rpc-server still running {PORT_FREE_WITHIN_S:.0f} s after its worker died"
        )
        with open(tmp_path / "second.log", "wb") as log:
            second = start_worker(free_port, log)
        try:
            wait_listening(endpoint, second, START_TIMEOUT_S)
            assert time.monotonic() - killed_at < PORT_FREE_WITHIN_S + START_TIMEOUT_S
        finally:
            stop(second)
    finally:
        stop(first)
        for server in servers:
            if not is_gone(server):
                server.kill()
