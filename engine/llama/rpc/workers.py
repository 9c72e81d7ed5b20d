"""RPC workers: llama.cpp's rpc-server, started as a process, and probes that never abort.

ggml-rpc itself aborts the calling process on a connection failure, so everything here works
on plain sockets or in a child process.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from engine.core.children import child_env, owned_cwd, python_command
from engine.core.endpoints import Endpoint, worker_start_command
from engine.core.errors import ModelError
from engine.llama.rpc.ggml_backends import lib_dir

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
RPC_SERVER = (
    "ggml-rpc-server"  # packaging/build_llama_wheel.py builds it and installs it beside the libraries
)
PROBE_TIMEOUT_S = 3.0
MEMORY_QUERY_TIMEOUT_S = 10.0
MEM_ENV = "GGML_RPC_SERVER_MEM_MB"  # our patch: the memory a worker reports is capped at this


FROZEN_NOTE = (
    "RPC workers need the installed package (`make setup`): the desktop bundle cannot start "
    "the processes that talk to them yet"
)


def is_frozen() -> bool:
    """A PyInstaller bundle: it has no interpreter to start the host and the memory query with
    (both are `python` child processes)."""
    return bool(getattr(sys, "frozen", False))


def require_not_frozen() -> None:
    if is_frozen():
        raise ModelError(FROZEN_NOTE)


def rpc_server_path() -> Path:
    path = lib_dir() / RPC_SERVER
    if not path.is_file():
        raise ModelError(
            f"llama.cpp's RPC worker is not installed ({path} is missing): "
            "rebuild llama.cpp with `python packaging/build_llama_wheel.py --install`"
        )
    return path


def probe(endpoint: Endpoint, timeout: float = PROBE_TIMEOUT_S) -> str:
    """ "" when something accepts connections there; else why not, in a few words."""
    try:
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout):
            return ""
    except ConnectionRefusedError:
        return "refused the connection"
    except TimeoutError:
        return f"did not answer in {timeout:.0f} s"
    except OSError as exc:
        return exc.strerror or str(exc)


def unreachable(endpoints: tuple[Endpoint, ...]) -> list[tuple[Endpoint, str]]:
    return [(e, why) for e in endpoints if (why := probe(e))]


def require_reachable(endpoints: tuple[Endpoint, ...]) -> None:
    """Raise ModelError naming the first worker that cannot be reached."""
    down = unreachable(endpoints)
    if down:
        endpoint, why = down[0]
        raise ModelError(
            f"RPC worker {endpoint} {why} (is `{worker_start_command(endpoint)}` running there?)"
        )


@dataclass(frozen=True)
class WorkerMemory:
    endpoint: Endpoint
    free_bytes: int = 0
    total_bytes: int = 0
    error: str = ""  # "" when the worker answered


def query_memory(endpoint: Endpoint, timeout: float = MEMORY_QUERY_TIMEOUT_S) -> WorkerMemory:
    """What a worker lends, asked over RPC from a child process (ggml-rpc aborts its process when
    the worker fails). A worker serves one client at a time: one busy serving an engine does not
    answer until that engine lets go."""
    why = probe(endpoint)
    if why:
        return WorkerMemory(endpoint, error=why)
    if is_frozen():
        return WorkerMemory(endpoint, error=FROZEN_NOTE)
    cmd = python_command("-m", "engine.llama.rpc.memory_query", str(endpoint))
    try:
        with owned_cwd() as cwd:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=child_env()
            )
    except subprocess.TimeoutExpired:
        return WorkerMemory(endpoint, error=f"no answer in {timeout:.0f} s (busy serving another client?)")
    if done.returncode != 0 or not done.stdout.strip():
        return WorkerMemory(
            endpoint,
            error="did not answer the RPC handshake (not a llama.cpp RPC worker, or another version?)",
        )
    free, total = json.loads(done.stdout.strip().splitlines()[-1])
    return WorkerMemory(endpoint, free, total)


def worker_command(endpoint: Endpoint, device: str = "", threads: int = 0) -> list[str]:
    cmd = [str(rpc_server_path()), "--host", endpoint.host, "--port", str(endpoint.port)]
    if device:
        cmd += ["--device", device]
    if threads:
        cmd += ["--threads", str(threads)]
    return cmd


def dies_with_parent(parent_pid: int):
    """A preexec_fn: the child gets SIGKILL when the thread that started it ends (Linux
    PR_SET_PDEATHSIG), so a killed `specprefill worker` leaves no rpc-server holding its port.
    Start workers from a thread that outlives them (the CLI's main thread does). Elsewhere: None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def set_parent_death_signal() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before the line above took effect
            os._exit(1)

    return set_parent_death_signal


class WorkerProcess:
    """One llama.cpp RPC worker process, owned: stop() ends it, and so does leaving the block."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        device: str = "",
        mem_gb: float = 0.0,
        threads: int = 0,
        log: Path | None = None,
        inherit_output: bool = False,
    ):
        """Output goes to `log`, or to our own stdout with inherit_output, or nowhere."""
        env = dict(os.environ)
        if mem_gb:
            env[MEM_ENV] = str(int(mem_gb * 1024))
        self.endpoint = endpoint
        self._log = open(log, "ab") if log else None if inherit_output else subprocess.DEVNULL
        # start_new_session: a Ctrl-C in the terminal reaches us, and we stop the worker ourselves;
        # a SIGKILL of ours cannot be caught, so the kernel ends the rpc-server then (dies_with_parent).
        # cwd: ggml looks for libggml-*.so backends in the executable's folder and in the current one,
        # which must not be the (untrusted) folder the user started us in.
        self.process = subprocess.Popen(
            worker_command(endpoint, device, threads),
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log is not None else None,
            cwd=lib_dir(),
            start_new_session=True,
            preexec_fn=dies_with_parent(os.getpid()),
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the worker accepts connections; ModelError when it exits or never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ModelError(
                    f"RPC worker on {self.endpoint} exited with status {self.process.returncode} "
                    "(port in use, or a device it does not have?)"
                )
            if not probe(self.endpoint, timeout=0.5):
                return
            time.sleep(0.1)
        self.stop()
        raise ModelError(f"RPC worker on {self.endpoint} did not start listening in {timeout:.0f} s")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Die at once, as a crashed machine would (tests' faults)."""
        if self.alive():
            self.process.kill()
            self.process.wait()

    def stop(self, grace: float = 5.0) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
            self._log = None

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
