"""Will a load or a run fit in memory? Estimate it, compare with what is free, refuse with the numbers.

Only the big allocations are counted, so the estimate is a floor: a refusal means the
work could not fit, instead of the process being killed half-way.

    target weights   the GGUF's tensor bytes (llama.cpp maps the whole file)
    target KV        n_ctx x layers x 2 (K and V) x KV heads x head size x 2 bytes (f16 cache)
    draft weights    parameters x bytes per value (fp32 on CPU, half precision on CUDA)
    draft KV         prompt tokens x layers x 2 x KV heads x head size x bytes per value
    draft attention  look-ahead rows: layers x heads x prompt tokens x 4 bytes, held twice
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

from engine.errors import InsufficientMemoryError
from engine.target.native import LlamaModel

TARGET_KV_BYTES = 2  # llama.cpp's default cache type is f16
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


@dataclass(frozen=True)
class KvShape:
    n_layers: int
    n_kv_heads: int
    head_dim: int
    bytes_per_value: int

    def bytes_for(self, n_tokens: int) -> int:
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * self.bytes_per_value * n_tokens


@dataclass(frozen=True)
class MemoryNeed:
    """What one step needs, part by part: ((label, bytes), ...)."""

    what: str
    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(n for _, n in self.parts)

    def breakdown(self) -> str:
        return " + ".join(f"{label} {format_bytes(n)}" for label, n in self.parts)


def format_bytes(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.0f} MiB"
    return f"{max(n, 0) / 1024:.0f} KiB"


def available_bytes(device: str) -> int:
    """Memory free for new allocations: the device's on CUDA, the system's otherwise."""
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    return int(psutil.virtual_memory().available)


def require_fits(need: MemoryNeed, device: str) -> None:
    free = available_bytes(device)
    if need.total > free:
        raise InsufficientMemoryError(
            f"{need.what} needs about {format_bytes(need.total)} ({need.breakdown()}), "
            f"but only {format_bytes(free)} is available; close other programs, "
            "lower the context size or use a shorter document")


# -- the shapes ------------------------------------------------------------------------
def target_kv_shape(model: LlamaModel) -> KvShape:
    n_layers, n_kv_heads, head_dim = model.attention_dims()
    return KvShape(n_layers, n_kv_heads, head_dim, TARGET_KV_BYTES)


def draft_kv_shape(config, bytes_per_value: int) -> KvShape:
    """From a transformers config: the draft's cache holds activations in the model's dtype."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    n_kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return KvShape(config.num_hidden_layers, n_kv_heads, head_dim, bytes_per_value)


def draft_weight_bytes(path: Path, bytes_per_value: int) -> int:
    """A model folder: its weight files; a GGUF: its parameters at the dtype the draft is loaded in."""
    path = Path(path)
    if path.is_dir():
        return sum(f.stat().st_size for f in path.iterdir() if f.suffix in WEIGHT_SUFFIXES)
    header = LlamaModel(path, vocab_only=True)  # reads the tensor table, not the weights
    try:
        return header.n_params() * bytes_per_value
    finally:
        header.close()


# -- the two checks ----------------------------------------------------------------------
def load_need(target: LlamaModel, n_ctx: int, draft_weights: int, device: str) -> MemoryNeed:
    """Checked once the target's weights are loaded: on CUDA they already hold device memory, so
    only what comes next counts; on CPU they are mapped file pages, which the system counts as
    available, so they count as needed too."""
    weights = () if device.startswith("cuda") else (("target weights", target.tensor_bytes()),)
    return MemoryNeed(f"loading the models with a {n_ctx}-token context", (
        *weights,
        (f"target KV cache for {n_ctx} tokens", target_kv_shape(target).bytes_for(n_ctx)),
        ("draft weights", draft_weights),
    ))


def draft_scoring_need(config, bytes_per_value: int, n_prompt: int) -> MemoryNeed:
    rows = 2 * config.num_hidden_layers * config.num_attention_heads * n_prompt * 4
    return MemoryNeed(f"draft scoring of {n_prompt} tokens", (
        ("draft KV cache", draft_kv_shape(config, bytes_per_value).bytes_for(n_prompt)),
        ("look-ahead attention", rows),
    ))
