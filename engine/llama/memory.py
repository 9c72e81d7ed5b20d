"""What the target needs in memory: its weights and its KV cache for the context window.

    target weights   the GGUF's tensor bytes (llama.cpp maps the whole file)
    target KV        n_ctx x layers x 2 (K and V) x KV heads x head size x 2 bytes (f16 cache)
"""

from __future__ import annotations

from engine.core.memory import KvShape, MemoryNeed
from engine.llama.native import LlamaModel

TARGET_KV_BYTES = 2  # llama.cpp's default cache type is f16


def target_kv_shape(model: LlamaModel) -> KvShape:
    n_layers, n_kv_heads, head_dim = model.attention_dims()
    return KvShape(n_layers, n_kv_heads, head_dim, TARGET_KV_BYTES)


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
