"""What the target needs in memory: its weights and its KV cache for the context window.

target weights   the GGUF's tensor bytes (llama.cpp maps the whole file, or copies it to the GPU)
target KV        n_ctx x layers x 2 (K and V) x KV heads x head size x 2 bytes (f16 cache)
"""

from __future__ import annotations

from engine.core.memory import KvShape, MemoryNeed, needs_by_device
from engine.llama.native import LlamaModel

TARGET_KV_BYTES = 2  # llama.cpp's default cache type is f16


def target_kv_shape(model: LlamaModel) -> KvShape:
    n_layers, n_kv_heads, head_dim = model.attention_dims()
    return KvShape(n_layers, n_kv_heads, head_dim, TARGET_KV_BYTES)


def load_needs(
    target: LlamaModel,
    n_ctx: int,
    target_device: str,
    draft_weights: int,
    draft_device: str,
    local_weights: bool = True,
) -> dict[str, MemoryNeed]:
    """What loading both models needs, per device. Checked with the target opened on the CPU
    (mapped file pages, which the system counts as available) before anything goes to a GPU:
    its weights and KV count where they will live, the draft's weights where the draft will.
    local_weights=False: the target's layers are split with RPC workers by their free memory."""
    return needs_by_device(
        f"loading the models with a {n_ctx}-token context",
        (
            (target_device, "target weights", target.tensor_bytes() if local_weights else 0),
            (target_device, f"target KV cache for {n_ctx} tokens", target_kv_shape(target).bytes_for(n_ctx)),
            (draft_device, "draft weights", draft_weights),
        ),
    )
