"""The host process: the target over RPC workers, served to the app through a connection.

Started by proxies.TargetHost as `python -c HOST_LAUNCH FD FLAG_FILE` (not `-m`: what it sends
must unpickle as engine.llama.rpc.host's classes, not __main__'s). FD is our end of a socketpair (a
multiprocessing Connection), FLAG_FILE a one-byte file whose byte is the app's Cancel.
The first message is a HostSpec; the host answers ("ready", HostInfo) or ("err", exception),
then serves calls until told to stop or its connection closes. ggml-rpc aborts this process
when a worker stops answering: the app sees the connection close, not a crash of its own.
"""

from __future__ import annotations

import mmap
import pickle
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import psutil

from engine.core.cancel import NEVER
from engine.core.errors import RuntimeFailure
from engine.llama.native import LlamaContext, LlamaModel, ensure_backend
from engine.llama.rpc.ggml_backends import add_server, device_memory
from engine.llama.rpc.split import LayerSplit, split_layers

HOST_LAUNCH = (
    "import sys; from engine.llama.rpc.host import main; sys.exit(main(int(sys.argv[1]), sys.argv[2]))"
)
MODEL = 0  # the object id of the model; contexts get ids from 1 up, chosen by the app
MODEL_CALLS = frozenset(
    {
        "tokenize",
        "token_piece",
        "token_text",
        "is_eog",
        "description",
        "n_ctx_train",
        "n_params",
        "tensor_bytes",
        "attention_dims",
        "chat_template",
        "apply_chat_template",
    }
)
CONTEXT_CALLS = frozenset(
    {"decode", "clear", "remove_after", "save_sequence", "load_sequence", "last_logits"}
)


@dataclass(frozen=True)
class HostSpec:
    target_path: Path
    n_layers: int
    workers: tuple[str, ...]  # "HOST:PORT", in order
    weights: tuple[float, ...] = ()  # an explicit split, this machine's first; (): by free memory


@dataclass(frozen=True)
class HostInfo:
    backends: tuple[str, ...]  # "CPU", then "RPC HOST:PORT" per worker
    split: LayerSplit
    worker_memory: tuple[tuple[int, int], ...]  # (free, total) bytes each worker lends
    local_free: int
    n_vocab: int


class FlagCancel:
    """The app's Cancel as llama.cpp's abort hook reads it here: byte 0 of a shared file."""

    def __init__(self, flag: mmap.mmap):
        self._flag = flag

    @property
    def cancelled(self) -> bool:
        return self._flag[0] != 0


def load_target(spec: HostSpec) -> tuple[LlamaModel, HostInfo]:
    """Register the workers, split the layers (by free memory unless told), load the target."""
    ensure_backend()
    devices = [add_server(worker)[0] for worker in spec.workers]  # a worker's first device
    memory = tuple(device_memory(d) for d in devices)
    local_free = int(psutil.virtual_memory().available)
    weights = spec.weights or (float(local_free), *(float(free) for free, _ in memory))
    split = split_layers(spec.n_layers, weights)
    model = LlamaModel(
        spec.target_path, n_gpu_layers=split.n_gpu_layers, devices=devices, tensor_split=split.tensor_split()
    )
    backends = ("CPU", *(f"RPC {w}" for w in spec.workers))
    return model, HostInfo(backends, split, memory, local_free, model.n_vocab)


class HostServer:
    def __init__(self, model: LlamaModel, cancel: FlagCancel):
        self.model = model
        self.cancel = cancel
        self.contexts: dict[int, LlamaContext] = {}

    def handle(self, op: str, obj: int, name: str, args: tuple, kwargs: dict):
        if op == "new_context":
            self.contexts[obj] = LlamaContext(self.model, **kwargs)
            return self.contexts[obj].n_ctx
        if op == "close_context":
            context = self.contexts.pop(obj, None)
            if context is not None:
                context.close()
            return None
        if obj == MODEL and name in MODEL_CALLS:
            return getattr(self.model, name)(*args, **kwargs)
        if name in CONTEXT_CALLS:
            return self._context_call(self.contexts[obj], name, args, kwargs)
        raise ValueError(f"the target host has no call {op} {name!r}")

    def _context_call(self, context: LlamaContext, name: str, args: tuple, kwargs: dict):
        if name != "decode":
            return getattr(context, name)(*args, **kwargs)
        context.cancel = self.cancel  # llama.cpp's abort hook follows the app's Cancel for this decode
        try:
            return context.decode(*args, **kwargs)
        finally:
            context.cancel = NEVER

    def serve(self, conn: Connection) -> None:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                return  # the app went away
            if message[0] == "stop":
                return
            try:
                reply = ("ok", self.handle(*message))
            except Exception as exc:  # the app re-raises it; the host goes on serving
                reply = ("err", portable(exc))
            conn.send(reply)

    def close(self) -> None:
        for context in self.contexts.values():
            context.close()
        self.model.close()


def portable(exc: Exception) -> Exception:
    """The exception as the app can unpickle it: ours and the builtins travel as they are."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeFailure(f"{type(exc).__name__}: {exc}")


def main(fd: int, flag_path: str) -> int:
    conn = Connection(fd)
    with open(flag_path, "r+b") as flag_file:
        flag = mmap.mmap(flag_file.fileno(), 1)
    spec: HostSpec = conn.recv()
    try:
        model, info = load_target(spec)
    except Exception as exc:
        conn.send(("err", portable(exc)))
        return 1
    server = HostServer(model, FlagCancel(flag))
    conn.send(("ready", info))
    try:
        server.serve(conn)
    finally:
        server.close()
    return 0
