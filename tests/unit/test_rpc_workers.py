"""The target over real llama.cpp RPC workers on loopback (tiny models, so it runs in seconds):
the same answers as the local target, restore positions over RPC, and faults: a worker that is
not there, one killed mid-prefill, one that hangs, Cancel. Only 127.0.0.1 is ever touched."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from engine.core.cancel import CancelToken
from engine.core.endpoints import Endpoint
from engine.core.errors import Cancelled, ModelError, WorkerLostError
from engine.core.events import RunFinished
from engine.core.settings import ModelSettings, RunSettings
from engine.llama.rpc.ggml_backends import has_rpc, lib_dir
from engine.llama.rpc.workers import RPC_SERVER, WorkerProcess, query_memory
from engine.pipeline import Engine

pytestmark = pytest.mark.skipif(
    not (lib_dir() / RPC_SERVER).is_file() or not has_rpc(),
    reason="llama.cpp was built without RPC: packaging/build_llama_wheel.py --install",
)

DOCUMENT = " ".join(
    f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(40)
)
QUESTION = "Which item is the green stone?"
SPEC = RunSettings(force=True, keep=0.25, chunk_size=8, max_new_tokens=6, positions="restore")


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture
def workers(tmp_path):
    started = [
        WorkerProcess(Endpoint("127.0.0.1", port), threads=1, log=tmp_path / f"worker-{port}.log")
        for port in free_ports(2)
    ]
    try:
        for worker in started:
            worker.wait_ready()
        yield started
    finally:
        for worker in started:
            worker.process.send_signal(signal.SIGCONT)  # a test may have stopped one
            worker.stop()


def settings_for(pair, workers=(), **extra) -> ModelSettings:
    target, draft = pair
    rpc = ",".join(str(w.endpoint) for w in workers)
    # both workers get a layer of the tiny target's two; this machine keeps the embeddings and the output
    split = "0," + ",".join("1" for _ in workers) if workers else ""
    return ModelSettings(
        target_path=target,
        draft_path=draft,
        n_ctx=2048,
        n_batch=64,
        n_threads=1,
        rpc=rpc,
        rpc_split=split,
        **extra,
    )


def answers(engine: Engine) -> dict[str, str]:
    events = list(engine.stream(DOCUMENT, QUESTION, "both", SPEC))
    return {e.run: e.result for e in events if isinstance(e, RunFinished)}


@pytest.fixture(scope="module")
def local_answers(pair, cache_home):
    engine = Engine.load(settings_for(pair))
    try:
        return {run: result.answer for run, result in answers(engine).items()}
    finally:
        engine.close()


def test_two_workers_give_the_local_answers_in_restore_mode(pair, cache_home, workers, local_answers):
    engine = Engine.load(settings_for(pair, workers))
    try:
        assert engine.info.target_backends == ("CPU", *(f"RPC {w.endpoint}" for w in workers))
        assert engine.info.target_device == "CPU 0 layers + 2 RPC workers 1+1"
        assert engine.info.positions_supported  # the gapped-positions patch works over RPC
        results = answers(engine)
        assert results["spec"].positions == "restore"
        assert {run: r.answer for run, r in results.items()} == local_answers
    finally:
        engine.close()


def test_a_worker_that_is_not_there_is_named_at_load(pair, cache_home, free_port):
    with pytest.raises(ModelError, match=f"RPC worker 127.0.0.1:{free_port} refused the connection"):
        Engine.load(settings_for(pair, [WorkerStub(free_port)]))


class WorkerStub:
    def __init__(self, port: int):
        self.endpoint = Endpoint("127.0.0.1", port)


def test_a_worker_killed_mid_prefill_ends_the_run_and_the_next_run_reconnects(
    pair, cache_home, workers, local_answers, tmp_path
):
    engine = Engine.load(settings_for(pair, workers))
    victim = workers[1]
    try:
        tokens = np.array(engine.tokenize(DOCUMENT), np.int32)[:200]
        steps = engine.runtime.iter_prefill(tokens, np.arange(len(tokens), dtype=np.int32))
        next(steps)
        victim.kill()
        started = time.monotonic()
        with pytest.raises(WorkerLostError, match=f"RPC worker {victim.endpoint} refused the connection"):
            for _ in steps:
                pass
        assert time.monotonic() - started < 30
        with pytest.raises(ModelError, match=f"{victim.endpoint} refused the connection"):
            answers(engine)  # still down: named again, nothing hangs
        revived = WorkerProcess(victim.endpoint, threads=1, log=tmp_path / "revived.log")
        workers[1] = revived
        revived.wait_ready()
        assert {run: r.answer for run, r in answers(engine).items()} == local_answers  # reconnected
    finally:
        engine.close()


@pytest.mark.slow
def test_a_worker_that_hangs_ends_the_run_after_the_timeout(pair, cache_home, workers):
    engine = Engine.load(settings_for(pair, workers, rpc_timeout=3))
    try:
        tokens = np.array(engine.tokenize(DOCUMENT), np.int32)[:64]
        os.kill(workers[0].process.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(WorkerLostError, match="no answer from the target's RPC workers in 3 s"):
            engine.runtime.prefill(tokens, np.arange(len(tokens), dtype=np.int32))
        assert time.monotonic() - started < 20
    finally:
        os.kill(workers[0].process.pid, signal.SIGCONT)
        engine.close()


def test_cancel_over_rpc_stops_the_run(pair, cache_home, workers):
    engine = Engine.load(settings_for(pair, workers))
    try:
        tokens = np.array(engine.tokenize(DOCUMENT), np.int32)[:200]
        cancel = CancelToken()
        steps = engine.runtime.iter_prefill(tokens, np.arange(len(tokens), dtype=np.int32), cancel)
        next(steps)
        cancel.cancel()
        with pytest.raises(Cancelled):
            for _ in steps:
                pass
        assert engine.runtime.prefill(tokens[:16], np.arange(16, dtype=np.int32)).shape[0] > 0
    finally:
        engine.close()


def test_a_worker_reports_at_most_the_memory_it_was_given(tmp_path, free_port):
    with WorkerProcess(Endpoint("127.0.0.1", free_port), mem_gb=1.5, log=tmp_path / "w.log") as worker:
        worker.wait_ready()
        memory = query_memory(worker.endpoint)
    assert memory.error == ""
    assert memory.free_bytes <= memory.total_bytes == int(1.5 * 1024) * 1024 * 1024


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_cli_run_with_a_worker_that_is_not_there_is_one_line_and_exit_2(
    pair, cache_home, free_port, tmp_path
):
    target, draft = pair
    doc = tmp_path / "doc.txt"
    doc.write_text(DOCUMENT)
    done = run_cli(
        "run",
        "--doc",
        str(doc),
        "--question",
        QUESTION,
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--rpc",
        f"127.0.0.1:{free_port}",
        "--n-ctx",
        "512",
        "--json",
    )  # --json: no progress lines
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"specprefill: error: RPC worker 127.0.0.1:{free_port} refused the connection "
        f"(is `specprefill worker --port {free_port}` running there?)"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_cli_worker_listens_on_loopback_and_stops_cleanly(free_port, stop):
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "worker", "--port", str(free_port), "--mem", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and query_memory(Endpoint("127.0.0.1", free_port)).error:
            time.sleep(0.2)
        assert query_memory(Endpoint("127.0.0.1", free_port)).total_bytes == 1024 * 1024 * 1024
        proc.send_signal(stop)  # Ctrl-C, or a kill: either way the rpc-server goes with it
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"worker listening on 127.0.0.1:{free_port}" in out and "worker stopped" in out
    assert "warning" not in err  # loopback: no warning
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", free_port), timeout=2).close()  # nothing left running


@pytest.mark.slow
def test_doctor_lists_each_worker_with_what_it_lends_and_fails_on_one_that_is_down(workers, free_port):
    rpc = f"{workers[0].endpoint},127.0.0.1:{free_port}"
    done = run_cli("doctor", "--rpc", rpc)
    backends = next(line for line in done.stdout.splitlines() if line.startswith("backends:"))
    assert f"CPU; RPC {workers[0].endpoint} (lends " in backends
    assert f"RPC 127.0.0.1:{free_port} refused the connection" in backends
    assert done.returncode == 2 and "backends" in done.stderr.strip().splitlines()[-1]


def test_a_worker_killed_mid_decode_ends_the_run_with_its_name(pair, cache_home, workers):
    engine = Engine.load(settings_for(pair, workers))
    try:
        tokens = np.array(engine.tokenize(DOCUMENT), np.int32)[:64]
        logits = engine.runtime.prefill(tokens, np.arange(len(tokens), dtype=np.int32))
        generated = engine.runtime.generate(logits, len(tokens), 50)
        next(generated)
        workers[0].kill()
        with pytest.raises(WorkerLostError, match=f"RPC worker {workers[0].endpoint} refused the connection"):
            for _ in generated:
                pass
    finally:
        engine.close()
