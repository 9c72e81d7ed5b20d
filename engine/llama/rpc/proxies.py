"""The app's side of the target host: a process that owns it, and proxies that look like
LlamaModel and LlamaContext to TargetRuntime.

Every call waits for the host with Cancel and a timeout in view: Cancel sets the host's abort
flag (and ends the host if it does not stop within a grace period); a host that dies, or goes
`timeout` seconds without an answer, ends the call with a WorkerLostError that names the workers
that no longer answer. The next call starts a new host and reconnects; the contexts come back
empty, under new generations, so nobody mistakes them for the caches they held.
"""

from __future__ import annotations

import mmap
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.children import child_env, python_command
from engine.core.endpoints import Endpoint
from engine.core.errors import Cancelled, WorkerLostError
from engine.llama.native import next_generation
from engine.llama.rpc.host import HOST_LAUNCH, MODEL, HostInfo, HostSpec
from engine.llama.rpc.workers import require_not_frozen, require_reachable, unreachable

POLL_S = 0.05
CANCEL_GRACE_S = 10.0  # a remote graph in flight ignores the abort flag: after this, the host is ended
LOG_TAIL_CHARS = 400


class TargetHost:
    """The host process and its connection. One call at a time (a lock); restarts when needed."""

    def __init__(self, spec: HostSpec, endpoints: tuple[Endpoint, ...], timeout: float):
        self.spec = spec
        self.endpoints = endpoints
        self.timeout = timeout
        self.info: HostInfo | None = None
        self._lock = threading.RLock()
        self._dir = tempfile.TemporaryDirectory(prefix="specprefill-host-")
        self._flag_path = Path(self._dir.name) / "cancel"
        self._flag_path.write_bytes(b"\0")
        with open(self._flag_path, "r+b") as f:
            self._flag = mmap.mmap(f.fileno(), 1)
        self._log_path = Path(self._dir.name) / "host.log"
        self._proc: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._contexts: weakref.WeakValueDictionary[int, RemoteContext] = weakref.WeakValueDictionary()
        self._next_id = MODEL + 1
        self._closed = False

    # -- lifetime -----------------------------------------------------------
    def start(self) -> HostInfo:
        """Probe the workers, start the host, load the target there; ModelError names what failed."""
        require_reachable(self.endpoints)
        parent_end, child_end = socket.socketpair()
        with open(self._log_path, "ab") as log:
            self._proc = subprocess.Popen(
                python_command("-c", HOST_LAUNCH, str(child_end.fileno()), str(self._flag_path)),
                pass_fds=(child_end.fileno(),),
                stdout=log,
                stderr=log,
                env=child_env(),
                cwd=self._dir.name,
                start_new_session=True,
            )
        child_end.close()
        self._conn = Connection(parent_end.detach())
        self._conn.send(self.spec)
        status, value = self._await(NEVER, "loading the target", max(self.timeout, 600.0))
        if status == "err":
            self._end()
            raise value
        self.info = value
        return value

    def _running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _ensure_running(self) -> None:
        if self._closed:
            raise RuntimeError("the target host is closed")
        if self._running():
            return
        self._end()
        self.start()
        for context in list(self._contexts.values()):  # a new host: the contexts come back empty
            self._request(("new_context", context.id, "", (), context.params), NEVER, "opening a context")
            context.generation = next_generation()

    def _end(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self._running():
                try:
                    self._conn.send(("stop",))
                    self._proc.wait(10)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._end()
            self._closed = True
            self._flag.close()
            self._dir.cleanup()

    def __del__(self):
        if not getattr(self, "_closed", True):
            self.close()

    # -- calls --------------------------------------------------------------
    def call(self, obj: int, name: str, *args, cancel: CancelToken = NEVER, **kwargs):
        with self._lock:
            self._ensure_running()
            return self._request(("call", obj, name, args, kwargs), cancel, name)

    def open_context(self, context: RemoteContext) -> int:
        with self._lock:
            self._ensure_running()
            context.id = self._next_id
            self._next_id += 1
            n_ctx = self._request(
                ("new_context", context.id, "", (), context.params), NEVER, "opening a context"
            )
            self._contexts[context.id] = context
            return n_ctx

    def close_context(self, context_id: int) -> None:
        with self._lock:
            self._contexts.pop(context_id, None)
            if self._running():
                self._request(("close_context", context_id, "", (), {}), NEVER, "closing a context")

    def _request(self, message: tuple, cancel: CancelToken, doing: str):
        self._flag[0] = 0
        try:
            self._conn.send(message)
        except OSError:
            self._lost(doing)
        status, value = self._await(cancel, doing, self.timeout)
        if status == "err":
            raise value
        return value

    def _await(self, cancel: CancelToken, doing: str, timeout: float) -> tuple[str, object]:
        """The host's answer, watching Cancel, the host's life and the timeout meanwhile."""
        started = time.monotonic()
        cancelled_at = None
        while True:
            try:
                if self._conn.poll(POLL_S):
                    return self._conn.recv()
            except (EOFError, OSError):
                self._lost(doing)
            if not self._running():
                self._lost(doing)
            if cancel.cancelled and cancelled_at is None:
                self._flag[0] = 1
                cancelled_at = time.monotonic()
            if cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_GRACE_S:
                self._end()  # a remote graph in flight: stop waiting for it; the next call restarts
                raise Cancelled()
            if time.monotonic() - started > timeout:
                self._end()
                raise WorkerLostError(
                    f"no answer from the target's RPC workers in {timeout:.0f} s while {doing} "
                    f"({', '.join(map(str, self.endpoints))}): the run was ended; "
                    "the next run reconnects (raise --rpc-timeout for slow workers)"
                )

    def _lost(self, doing: str):
        """The host died or its connection broke: name the workers that no longer answer."""
        code = self._proc.poll() if self._proc is not None else None
        self._end()
        down = unreachable(self.endpoints)
        if down:
            names = "; ".join(f"{e} {why}" for e, why in down)
            raise WorkerLostError(
                f"RPC worker {names}, while {doing}: the run was ended; the next run reconnects, "
                "or remove the worker in Settings ▸ Remote workers"
            )
        raise WorkerLostError(
            f"the target's host process stopped (exit status {code}) while {doing}: "
            f"{self._log_tail() or 'no message'}; the next run starts it again"
        )

    def _log_tail(self) -> str:
        try:
            text = self._log_path.read_text(errors="replace")
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return " / ".join(lines[-3:])[-LOG_TAIL_CHARS:]


class RemoteModel:
    """LlamaModel's face for a target loaded in the host process."""

    def __init__(self, host: TargetHost, path: Path):
        self.host = host
        self.path = Path(path)
        self.n_vocab = host.info.n_vocab
        self._vocab: dict[
            tuple[str, int], object
        ] = {}  # (method, token) -> answer: the vocabulary never changes

    def _call(self, name: str, *args, **kwargs):
        return self.host.call(MODEL, name, *args, **kwargs)

    def _vocab_call(self, name: str, token: int):
        """One round trip per distinct token and method, not per generated token."""
        key = (name, token)
        if key not in self._vocab:
            self._vocab[key] = self._call(name, token)
        return self._vocab[key]

    def close(self) -> None:
        self.host.close()

    def description(self) -> str:
        return self._call("description")

    def n_ctx_train(self) -> int:
        return self._call("n_ctx_train")

    def n_params(self) -> int:
        return self._call("n_params")

    def tensor_bytes(self) -> int:
        return self._call("tensor_bytes")

    def attention_dims(self) -> tuple[int, int, int]:
        return self._call("attention_dims")

    def chat_template(self) -> str | None:
        return self._call("chat_template")

    def apply_chat_template(self, messages: list[tuple[str, str]]) -> str:
        return self._call("apply_chat_template", messages)

    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        return self._call("tokenize", text, parse_special=parse_special)

    def token_text(self, token: int) -> bytes:
        return self._vocab_call("token_text", token)

    def token_piece(self, token: int) -> bytes:
        return self._vocab_call("token_piece", token)

    def is_eog(self, token: int) -> bool:
        return self._vocab_call("is_eog", token)


class RemoteContext:
    """LlamaContext's face for a context in the host process. `cancel` and `generation` live here."""

    def __init__(
        self, model: RemoteModel, *, n_ctx: int, n_batch: int, n_threads: int, flash_attn: str = "auto"
    ):
        self.model = model
        self.n_batch = n_batch
        self.n_threads = n_threads
        self.flash_attn = flash_attn
        self.params = dict(n_ctx=n_ctx, n_batch=n_batch, n_threads=n_threads, flash_attn=flash_attn)
        self.id = 0
        self.cancel: CancelToken = NEVER
        self.n_ctx = model.host.open_context(self)
        self.generation = next_generation()
        self._open = True

    def _call(self, name: str, *args, cancel: CancelToken = NEVER):
        return self.model.host.call(self.id, name, *args, cancel=cancel)

    def like(self) -> RemoteContext:
        return RemoteContext(self.model, **self.params)

    def close(self) -> None:
        if self._open:
            self._open = False
            self.model.host.close_context(self.id)

    def clear(self) -> None:
        self._call("clear")
        self.generation = next_generation()

    def remove_after(self, position: int) -> bool:
        return self._call("remove_after", position)

    def save_sequence(self, path: Path, tokens: np.ndarray) -> int:
        return self._call("save_sequence", path, tokens)

    def load_sequence(self, path: Path, capacity: int) -> np.ndarray:
        self.generation = next_generation()
        return self._call("load_sequence", path, capacity)

    def decode(self, tokens: np.ndarray, positions: np.ndarray, want_logits: bool) -> int:
        return self._on_this_cache("decode", tokens, positions, want_logits, cancel=self.cancel)

    def last_logits(self) -> np.ndarray:
        return self._on_this_cache("last_logits")

    def _on_this_cache(self, name: str, *args, cancel: CancelToken = NEVER):
        """A call that builds on what the KV cache holds. A host that died since the last call is
        started again with empty contexts (new generations): the call then ran on an empty cache,
        and the run that filled the old one is ended rather than continued on a wrong cache."""
        generation = self.generation
        value = self._call(name, *args, cancel=cancel)
        if self.generation != generation:
            raise WorkerLostError(
                f"the target's host process stopped between two calls of a run ({name}): its KV cache "
                "went with it, so the run was ended; the next run starts afresh"
            )
        return value


def open_remote_target(spec: HostSpec, endpoints: tuple[Endpoint, ...], timeout: float) -> RemoteModel:
    """The target loaded in a new host process over these workers; ModelError names a worker that
    cannot be reached, before anything starts."""
    require_not_frozen()
    host = TargetHost(spec, endpoints, timeout)
    try:
        host.start()
    except BaseException:
        host.close()
        raise
    return RemoteModel(host, spec.target_path)
