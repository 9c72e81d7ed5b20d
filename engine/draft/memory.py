"""What the draft needs in memory: its weights, and its cache and attention rows while scoring.

draft weights    parameters x bytes per value (fp32 on CPU, half precision on CUDA)
draft KV         prompt tokens x layers x 2 x KV heads x head size x bytes per value
draft attention  look-ahead rows: layers x heads x prompt tokens x 4 bytes, held twice
question rows    the question's queries over the prompt (when scored): rows x heads x prompt tokens
                 x 4 bytes, three at once (logits, masked, softmax), one layer at a time; at most
                 DRAFT_QUESTION_ROWS_MAX rows, however long the question
"""

from __future__ import annotations

from pathlib import Path

from engine.core.memory import KvShape, MemoryNeed
from engine.core.settings import DRAFT_QUESTION_ROWS_MAX
from engine.models.gguf_header import read_header

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


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
    # The header alone: 0.17 s for the default draft, where gguf.GGUFReader's parse of its vocabulary took 8.8 s.
    return read_header(path).n_parameters * bytes_per_value


def draft_scoring_need(config, bytes_per_value: int, n_prompt: int, question_rows: int = 0) -> MemoryNeed:
    """Measured on an H200 (bf16, `research/gpu/`): with 48 question rows these parts come
    within 10% of the allocator's peak over the weights, 4K to 32K tokens."""
    rows = 2 * config.num_hidden_layers * config.num_attention_heads * n_prompt * 4
    parts = [
        ("draft KV cache", draft_kv_shape(config, bytes_per_value).bytes_for(n_prompt)),
        ("look-ahead attention", rows),
    ]
    question_rows = min(question_rows, DRAFT_QUESTION_ROWS_MAX)  # the scorer records no more
    if question_rows > 0:
        parts.append(("question attention", 3 * question_rows * config.num_attention_heads * n_prompt * 4))
    return MemoryNeed(f"draft scoring of {n_prompt} tokens", tuple(parts))
