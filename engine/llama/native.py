"""Owner classes for llama.cpp's native handles: model, context, batch.

Each class frees its handle exactly once (close() or garbage collection). Positions are
always passed explicitly: llama-cpp-python's high-level `Llama.eval` writes contiguous
positions, which SpecPrefill's `restore` mode cannot use.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import threading
from pathlib import Path

import llama_cpp.llama_cpp as L
import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import ModelError, RuntimeFailure
from engine.llama import cpu_backend
from engine.llama.builtin_template import architecture, builtin_template_name

log = logging.getLogger(__name__)

_GGML_LOG_WARN, _GGML_LOG_ERROR = 3, 4
_BACKEND_LOCK = threading.Lock()
_BACKEND_READY = False
_CPU_PATH: cpu_backend.CpuPath | None = None
# Generations are unique across all contexts: a prefix recorded against one context can never
# match another one (the engine keeps a second context for documents' prefixes).
_GENERATIONS = itertools.count(1)


# What llama.cpp logs as errors when a decode is aborted on purpose (Cancel, or a request taking
# the target from a background fill): compute status 1 is GGML_STATUS_ABORTED, decode code 2 "aborted".
_ABORT_LINES = ("failed with error 1", "compute status: 1", "failed to decode, ret = 2")


@L.llama_log_callback
def _log_to_python(level, text, _user_data):
    # llama.cpp is chatty; its errors (e.g. rejected positions) reach our log, the rest stays at debug.
    if level in (_GGML_LOG_WARN, _GGML_LOG_ERROR):
        message = text.decode("utf-8", "replace").rstrip()
        if message:
            error = level == _GGML_LOG_ERROR and not message.endswith(_ABORT_LINES)
            log.log(logging.WARNING if error else logging.DEBUG, "llama.cpp: %s", message)


def _default_selftest_model() -> Path | None:
    from engine.models.defaults import installed_default_target

    return installed_default_target()


def _start_llama(path: cpu_backend.CpuPath) -> None:
    """llama.cpp's backend init, once its backends are registered. Holds _BACKEND_LOCK."""
    global _BACKEND_READY, _CPU_PATH
    L.llama_backend_init()
    _CPU_PATH = path
    _BACKEND_READY = True


def mark_backend_loaded() -> None:
    """For a process that registered its backends itself (the CPU self-test's child)."""
    with _BACKEND_LOCK:
        L.llama_log_set(_log_to_python, ctypes.c_void_p(0))
        _start_llama(cpu_backend.CpuPath("under test", True, "under test"))


def ensure_backend() -> None:
    """Load the CPU variant (engine.llama.cpu_backend) and llama.cpp's other backends, once.

    The AMX self-test decodes with the default target: Q4_K_M, the weights that crash there.
    Without it the self-test does not run and the extra buffer types stay off."""
    with _BACKEND_LOCK:
        if not _BACKEND_READY:
            L.llama_log_set(_log_to_python, ctypes.c_void_p(0))  # first: ggml logs each backend it loads
            directory = cpu_backend.lib_dir()
            path, library = cpu_backend.choose_cpu_path(directory, _default_selftest_model())
            cpu_backend.load_backends(library, directory)
            log.info("llama.cpp: %s", path.summary())
            _start_llama(path)


def cpu_path() -> cpu_backend.CpuPath:
    """The CPU variant loaded and the self-test's verdict (doctor, results)."""
    ensure_backend()
    return _CPU_PATH


def build_info() -> tuple[str, bool]:
    """llama.cpp's build flags (CPU features, backends) and whether it can offload layers to a GPU."""
    ensure_backend()
    flags = L.llama_print_system_info().decode("utf-8", "replace").strip(" |")
    return " ".join(flags.split()), bool(L.llama_supports_gpu_offload())


def next_generation() -> int:
    """A KV cache generation no context has had: see LlamaContext.generation."""
    return next(_GENERATIONS)


def _set_devices(params, devices: list[int] | None, tensor_split: list[float] | None) -> tuple:
    """Point the model params at these devices and split; returns the arrays they point into."""
    if devices is None:
        return ()
    dev_array = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)  # NULL-terminated
    split = list(tensor_split or [])
    split_array = (ctypes.c_float * L.llama_max_devices())(*split)
    params.devices = ctypes.cast(dev_array, ctypes.c_void_p)
    params.tensor_split = split_array
    return dev_array, split_array


class LlamaModel:
    """A loaded GGUF model and its vocabulary."""

    def __init__(
        self,
        path: Path,
        *,
        n_gpu_layers: int = 0,
        vocab_only: bool = False,
        devices: list[int] | None = None,
        tensor_split: list[float] | None = None,
        use_extra_bufts: bool | None = None,
    ):
        """`devices` (ggml device handles, e.g. RPC workers') take the last n_gpu_layers layers,
        shared in the proportions of `tensor_split`; None: llama.cpp's own choice of devices.
        `use_extra_bufts` None: as the CPU path chose (engine.llama.cpu_backend)."""
        ensure_backend()
        params = L.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        params.vocab_only = vocab_only
        params.use_extra_bufts = _CPU_PATH.extra_bufts if use_extra_bufts is None else use_extra_bufts
        keep_alive = _set_devices(params, devices, tensor_split)  # read by the load below
        self.path = Path(path)
        self._ptr = L.llama_model_load_from_file(str(self.path).encode(), params)
        del keep_alive
        if not self._ptr:
            raise ModelError(f"llama.cpp could not load {self.path.name}: not a valid GGUF model?")
        self.vocab = L.llama_model_get_vocab(self._ptr)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)

    @property
    def ptr(self):
        if not self._ptr:
            raise RuntimeError("model is closed")
        return self._ptr

    def close(self) -> None:
        if self._ptr:
            L.llama_model_free(self._ptr)
            self._ptr = None

    def __del__(self):
        self.close()

    # -- metadata ---------------------------------------------------------
    def description(self) -> str:
        buf = ctypes.create_string_buffer(256)
        L.llama_model_desc(self.ptr, buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def n_ctx_train(self) -> int:
        return int(L.llama_model_n_ctx_train(self.ptr))

    def n_params(self) -> int:
        return int(L.llama_model_n_params(self.ptr))

    def tensor_bytes(self) -> int:
        """Bytes of all weight tensors, as stored (quantized) in the file."""
        return int(L.llama_model_size(self.ptr))

    def attention_dims(self) -> tuple[int, int, int]:
        """(layers, KV heads, head size): what the KV cache holds per token, per K and per V.
        Not for a vocab-only model: llama.cpp aborts the process when asked for its heads."""
        n_head = max(1, int(L.llama_model_n_head(self.ptr)))
        head_dim = int(L.llama_model_n_embd(self.ptr)) // n_head
        return int(L.llama_model_n_layer(self.ptr)), int(L.llama_model_n_head_kv(self.ptr)), head_dim

    def chat_template(self) -> str | None:
        raw = L.llama_model_chat_template(self.ptr, None)
        return raw.decode("utf-8") if raw else None

    def token_text(self, token: int) -> bytes:
        return L.llama_vocab_get_text(self.vocab, token) or b""

    def is_eog(self, token: int) -> bool:
        return bool(L.llama_vocab_is_eog(self.vocab, token))

    # -- text <-> tokens --------------------------------------------------
    def tokenize(self, text: str, *, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 16
        buf = (L.llama_token * capacity)()
        n = L.llama_tokenize(self.vocab, data, len(data), buf, capacity, False, parse_special)
        if n < 0:  # the buffer was too small: -n is the size needed
            capacity = -n
            buf = (L.llama_token * capacity)()
            n = L.llama_tokenize(self.vocab, data, len(data), buf, capacity, False, parse_special)
        if n < 0:
            raise RuntimeFailure("tokenization failed")
        return list(buf[:n])

    def token_piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, True)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, True)
        return buf.raw[:n]

    def apply_chat_template(self, messages: list[tuple[str, str]]) -> str:
        """Render (role, content) messages with the model's own template, ending with the assistant header."""
        # A base model ships no template: its family's built-in one (engine.llama.builtin_template).
        template = self.chat_template() or builtin_template_name(architecture(self.ptr))
        chat = (L.llama_chat_message * len(messages))()
        keep = []  # the encoded strings must outlive the call
        for i, (role, content) in enumerate(messages):
            keep += [role.encode(), content.encode()]
            chat[i].role, chat[i].content = keep[-2], keep[-1]
        size = sum(len(k) for k in keep) * 2 + 512
        buf = ctypes.create_string_buffer(size)
        n = L.llama_chat_apply_template(template.encode(), chat, len(messages), True, buf, size)
        if n > size:
            buf = ctypes.create_string_buffer(n)
            n = L.llama_chat_apply_template(template.encode(), chat, len(messages), True, buf, n)
        if n < 0:
            raise ModelError(f"{self.path.name}: its chat template is not supported by llama.cpp")
        return buf.raw[:n].decode("utf-8")


class LlamaBatch:
    """A llama_batch for one sequence, filled from numpy arrays (no per-token Python loop)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._batch = L.llama_batch_init(capacity, 0, 1)
        self._tokens = np.ctypeslib.as_array(self._batch.token, shape=(capacity,))
        self._pos = np.ctypeslib.as_array(self._batch.pos, shape=(capacity,))
        self._logits = np.ctypeslib.as_array(self._batch.logits, shape=(capacity,))
        np.ctypeslib.as_array(self._batch.n_seq_id, shape=(capacity,))[:] = 1
        for i in range(capacity):  # once per batch object: every token belongs to sequence 0
            self._batch.seq_id[i][0] = 0
        self._open = True

    def fill(self, tokens: np.ndarray, positions: np.ndarray, want_logits_last: bool) -> None:
        n = len(tokens)
        if n > self.capacity or n != len(positions):
            raise ValueError(f"batch of {n} tokens does not fit capacity {self.capacity}")
        self._tokens[:n] = tokens
        self._pos[:n] = positions
        self._logits[:n] = 0
        if want_logits_last:
            self._logits[n - 1] = 1
        self._batch.n_tokens = n

    @property
    def struct(self):
        return self._batch

    def close(self) -> None:
        if self._open:
            L.llama_batch_free(self._batch)
            self._open = False

    def __del__(self):
        self.close()


# llama_decode's return codes (llama.h): 0 ok, 1 no KV slot, 2 aborted, -1 bad batch, < -1 fatal.
DECODE_ERRORS = {
    1: "no room in the KV cache for this batch (context full): reduce the prompt or raise the context size",
    2: "cancelled",
    -1: "llama.cpp rejected the batch (invalid tokens or positions)",
}
# The fatal codes come from ggml's compute status; the message keeps the code for bug reports.
_FATAL_CAUSES = {
    -2: "memory allocation failed: the machine is out of memory; lower the context size",
    -3: "the compute backend failed",
}


def decode_error_message(rc: int) -> str:
    if rc in DECODE_ERRORS:
        return DECODE_ERRORS[rc]
    if rc > 0:
        return f"llama_decode returned warning code {rc}: the batch was not processed"
    return f"llama_decode failed with code {rc} ({_FATAL_CAUSES.get(rc, 'compute or memory error')})"


# llama.cpp's llama_flash_attn_type, by the names the settings use.
FLASH_ATTN_TYPES = {"auto": -1, "off": 0, "on": 1}


class LlamaContext:
    """An inference context with its KV cache and an abort hook for Cancel."""

    def __init__(
        self, model: LlamaModel, *, n_ctx: int, n_batch: int, n_threads: int, flash_attn: str = "auto"
    ):
        params = L.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = 1
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.flash_attn_type = FLASH_ATTN_TYPES[flash_attn]
        params.no_perf = True
        self.model = model
        self.n_batch = n_batch
        self.n_threads = n_threads
        self.flash_attn = flash_attn
        self._ptr = L.llama_init_from_model(model.ptr, params)
        if not self._ptr:
            raise ModelError(f"could not create a llama.cpp context of {n_ctx} tokens (out of memory?)")
        self.n_ctx = int(L.llama_n_ctx(self._ptr))  # llama.cpp may round the size up
        self.cancel: CancelToken = NEVER
        # A new one at every clear(): whoever filled the KV cache at generation g knows it still
        # holds their tokens while the generation is still g.
        self.generation = next_generation()
        self._abort_cb = L.ggml_abort_callback(lambda _data: self.cancel.cancelled)
        L.llama_set_abort_callback(self._ptr, self._abort_cb, None)
        self.batch = LlamaBatch(n_batch)

    @property
    def ptr(self):
        if not self._ptr:
            raise RuntimeError("context is closed")
        return self._ptr

    def like(self) -> LlamaContext:
        """A second context on the same model with the same settings: a KV cache of its own."""
        return LlamaContext(
            self.model,
            n_ctx=self.n_ctx,
            n_batch=self.n_batch,
            n_threads=self.n_threads,
            flash_attn=self.flash_attn,
        )

    def close(self) -> None:
        if self._ptr:
            self.batch.close()
            L.llama_free(self._ptr)
            self._ptr = None

    def __del__(self):
        self.close()

    def clear(self) -> None:
        L.llama_memory_clear(L.llama_get_memory(self.ptr), True)
        self.generation = next_generation()

    def remove_after(self, position: int) -> bool:
        """Drop the KV entries at positions >= position (sequence 0), keeping those before it.

        False when llama.cpp cannot cut the sequence there (some memory types cannot): the
        caller must then clear and start over."""
        return bool(L.llama_memory_seq_rm(L.llama_get_memory(self.ptr), 0, position, -1))

    def save_sequence(self, path: Path, tokens: np.ndarray) -> int:
        """Write sequence 0's KV state, with the tokens it holds, to `path`; returns the bytes written."""
        ids = np.ascontiguousarray(tokens, dtype=np.int32)
        written = L.llama_state_seq_save_file(
            self.ptr, str(path).encode(), 0, ids.ctypes.data_as(ctypes.POINTER(L.llama_token)), len(ids)
        )
        if not written:
            raise RuntimeFailure(f"llama.cpp could not save the sequence state to {path}")
        return int(written)

    def load_sequence(self, path: Path, capacity: int) -> np.ndarray:
        """Clear the KV cache (a new generation, as clear()), then load a state saved by save_sequence
        into sequence 0; returns the tokens saved with it (at most `capacity`)."""
        self.clear()
        tokens = (L.llama_token * capacity)()
        count = ctypes.c_size_t(0)
        read = L.llama_state_seq_load_file(
            self.ptr, str(path).encode(), 0, tokens, capacity, ctypes.byref(count)
        )
        if not read:
            self.clear()  # a failed load may leave part of a state behind
            raise RuntimeFailure(f"llama.cpp could not load the sequence state from {path}")
        return np.array(tokens[: count.value], dtype=np.int32)

    def decode(self, tokens: np.ndarray, positions: np.ndarray, want_logits: bool) -> int:
        """One llama_decode of at most n_batch tokens at explicit positions; returns llama's code."""
        self.batch.fill(tokens, positions, want_logits)
        return int(L.llama_decode(self.ptr, self.batch.struct))

    def last_logits(self) -> np.ndarray:
        ptr = L.llama_get_logits_ith(self.ptr, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)).copy()
