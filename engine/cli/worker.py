"""`specprefill worker`: lend this machine's CPU or GPU to a target over llama.cpp's RPC backend.

It runs llama.cpp's own rpc-server (built with the patched wheel) until Ctrl-C. Loopback by
default: the RPC protocol has no authentication, so another address needs an explicit --host
and gets a warning.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from engine.api.maintenance import WorkerProcess
from engine.core.cancel import CancelToken
from engine.core.endpoints import DEFAULT_WORKER_PORT, LOOPBACK, Endpoint, is_loopback
from engine.core.errors import SettingsError

NO_AUTH_WARNING = (
    "warning: the RPC protocol has no authentication: anyone who can reach {endpoint} can use "
    "this machine's memory and compute through it. Bind other addresses on trusted networks only."
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "worker", help="lend this machine to a target over llama.cpp's RPC backend (until Ctrl-C)"
    )
    p.add_argument(
        "--host",
        default=LOOPBACK,
        help=f"address to bind (default: {LOOPBACK}, this machine only; "
        "anything else is reachable by others: trusted networks only)",
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_WORKER_PORT, help=f"port (default: {DEFAULT_WORKER_PORT})"
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N, or a llama.cpp device name")
    p.add_argument(
        "--mem",
        type=float,
        default=0.0,
        metavar="GB",
        help="the most memory this worker lends, as it reports it to the app's layer split "
        "(default: all that is free)",
    )
    p.add_argument("--threads", type=int, default=0, help="CPU threads (default: llama.cpp's)")
    p.set_defaults(command=command)
    return p


def llama_device(device: str) -> str:
    """Our device names in llama.cpp's: cpu → CPU, cuda → CUDA0, cuda:1 → CUDA1."""
    kind, _, index = device.partition(":")
    if kind.lower() == "cpu":
        return "CPU"
    if kind.lower() == "cuda":
        return f"CUDA{index or 0}"
    return device


def check_args(args: argparse.Namespace) -> Endpoint:
    if not 1 <= args.port <= 65535:
        raise SettingsError(f"--port must be in [1, 65535], got {args.port}")
    if args.mem < 0 or args.threads < 0:
        raise SettingsError("--mem and --threads must be >= 0")
    return Endpoint(args.host, args.port)


def binding_warning(endpoint: Endpoint) -> str:
    """The warning a worker reachable from other machines prints first; "" on loopback."""
    return "" if is_loopback(endpoint.host) else NO_AUTH_WARNING.format(endpoint=endpoint)


def stop_on_termination(cancel: CancelToken) -> None:
    """SIGTERM and SIGHUP stop the worker as Ctrl-C does: the rpc-server runs in a session of its own,
    so without this a killed `specprefill worker` would leave it listening."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: cancel.cancel())


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    endpoint = check_args(args)
    stop_on_termination(cancel)
    warning = binding_warning(endpoint)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    with WorkerProcess(
        endpoint, device=llama_device(args.device), mem_gb=args.mem, threads=args.threads, inherit_output=True
    ) as worker:
        worker.wait_ready()
        lends = f"at most {args.mem:g} GB" if args.mem else "all its free memory"
        print(f"worker listening on {endpoint} ({args.device}, lends {lends}); Ctrl-C stops it", flush=True)
        while worker.alive() and not cancel.cancelled:
            time.sleep(0.2)
        if not worker.alive():
            raise SettingsError(f"the worker on {endpoint} exited with status {worker.process.returncode}")
    print("worker stopped", flush=True)
    return 0
