"""Random-weight GGUF files with the shape of a real target, for timing only.

Users run 7B and 14B targets; the TTFT a CPU gives them depends on the model's shape (layers,
heads, hidden and feed-forward sizes, quantization), not on its weights' values. A file with
the right shape and random Q4_K/Q6_K blocks times like the real model, and its answers mean
nothing: every name, path and report says "timing only". The vocabulary is copied from a real
GGUF (the default target), so the default draft can score for it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.core.cancel import NEVER, CancelToken

TIMING_ONLY = "random weights, timing only"


@dataclass(frozen=True)
class TargetShape:
    """What decides a llama-architecture model's prefill cost (from the model's config.json)."""

    name: str
    label: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    context: int = 32768
    rope_base: float = 1_000_000.0

    @property
    def kv_dim(self) -> int:
        return self.hidden // self.heads * self.kv_heads


# Qwen2.5's published configs (Qwen/Qwen2.5-*-Instruct, config.json).
SHAPES: dict[str, TargetShape] = {
    shape.name: shape
    for shape in (
        TargetShape("qwen2.5-1.5b", "Qwen2.5-1.5B", layers=28, hidden=1536, heads=12, kv_heads=2, ffn=8960),
        TargetShape("qwen2.5-7b", "Qwen2.5-7B", layers=28, hidden=3584, heads=28, kv_heads=4, ffn=18944),
        TargetShape("qwen2.5-14b", "Qwen2.5-14B", layers=48, hidden=5120, heads=40, kv_heads=8, ffn=13824),
    )
}

# (bytes per block, byte offsets of its fp16 scales) for the two K-quants of Q4_K_M.
_BLOCK = {"Q4_K": (144, (0, 2)), "Q6_K": (210, (208,))}  # (bytes, fp16 scale offsets)
_ELEMENTS_PER_BLOCK = 256


@dataclass(frozen=True)
class TensorPlan:
    name: str
    shape: tuple[int, ...]  # ggml order: ne0 (the row length) first
    kind: str  # "F32", "Q4_K" or "Q6_K"

    @property
    def nbytes(self) -> int:
        rows = int(np.prod(self.shape[1:], dtype=np.int64)) if len(self.shape) > 1 else 1
        if self.kind == "F32":
            return 4 * rows * self.shape[0]
        block_bytes, _ = _BLOCK[self.kind]
        return rows * self.shape[0] // _ELEMENTS_PER_BLOCK * block_bytes


def shape_by_name(name: str) -> TargetShape:
    try:
        return SHAPES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown target shape {name!r}; known: {', '.join(SHAPES)}") from None


def uses_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's Q4_K_M rule for attn_v and ffn_down: Q6_K in the first and last eighth of the
    layers and in every third layer between them, Q4_K elsewhere."""
    eighth = layers // 8
    return layer < eighth or layer >= 7 * layers // 8 or (layer - eighth) % 3 == 2


def tensor_plan(shape: TargetShape, vocab: int) -> list[TensorPlan]:
    """The tensors of a qwen2-architecture GGUF, in the order llama.cpp's converter writes them."""
    h, kv, ffn = shape.hidden, shape.kv_dim, shape.ffn
    plan = [
        TensorPlan("token_embd.weight", (h, vocab), "Q4_K"),
        TensorPlan("output_norm.weight", (h,), "F32"),
        TensorPlan("output.weight", (h, vocab), "Q6_K"),
    ]
    for i in range(shape.layers):
        heavy = "Q6_K" if uses_more_bits(i, shape.layers) else "Q4_K"
        plan += [
            TensorPlan(f"blk.{i}.attn_norm.weight", (h,), "F32"),
            TensorPlan(f"blk.{i}.attn_q.weight", (h, h), "Q4_K"),
            TensorPlan(f"blk.{i}.attn_q.bias", (h,), "F32"),
            TensorPlan(f"blk.{i}.attn_k.weight", (h, kv), "Q4_K"),
            TensorPlan(f"blk.{i}.attn_k.bias", (kv,), "F32"),
            TensorPlan(f"blk.{i}.attn_v.weight", (h, kv), heavy),
            TensorPlan(f"blk.{i}.attn_v.bias", (kv,), "F32"),
            TensorPlan(f"blk.{i}.attn_output.weight", (h, h), "Q4_K"),
            TensorPlan(f"blk.{i}.ffn_norm.weight", (h,), "F32"),
            TensorPlan(f"blk.{i}.ffn_gate.weight", (h, ffn), "Q4_K"),
            TensorPlan(f"blk.{i}.ffn_up.weight", (h, ffn), "Q4_K"),
            TensorPlan(f"blk.{i}.ffn_down.weight", (ffn, h), heavy),
        ]
    return plan


def random_blocks(kind: str, n_blocks: int, row_length: int, rng: np.random.Generator) -> np.ndarray:
    """Random quantized blocks whose weights have mean about 0 and std about 1/sqrt(row_length), as
    a trained layer's do, so activations stay finite through every layer (inf and NaN, or a
    residual stream that grows without bound, would time differently)."""
    block_bytes, _ = _BLOCK[kind]
    pool = rng.integers(0, 256, size=(min(n_blocks, 4096), block_bytes), dtype=np.uint8)
    if kind == "Q4_K":
        # d, dmin, then 12 bytes of 6-bit sub-block scales and mins: every scale 1 and min 8, and
        # dmin = d, so a weight is d * (q - 8) with q uniform in 0..15 (std 4.6).
        d = _f16_bytes(1.0 / (4.6 * np.sqrt(row_length)))
        pool[:, 0:2] = d
        pool[:, 2:4] = d
        pool[:, 4:16] = np.array([1, 1, 1, 1, 8, 8, 8, 8, 0x81, 0x81, 0x81, 0x81], dtype=np.uint8)
    else:
        # ql, qh, 16 int8 scales, d: every scale 1, so a weight is d * (q - 32), q in 0..63 (std 18.5).
        pool[:, 192:208] = 1
        pool[:, 208:210] = _f16_bytes(1.0 / (18.5 * np.sqrt(row_length)))
    reps = -(-n_blocks // len(pool))
    return np.tile(pool, (reps, 1))[:n_blocks]


def _f16_bytes(value: float) -> np.ndarray:
    return np.frombuffer(np.float16(value).tobytes(), dtype=np.uint8)


def tensor_data(plan: TensorPlan, rng: np.random.Generator) -> np.ndarray:
    if plan.kind == "F32":
        if plan.name.endswith("norm.weight"):
            return np.ones(plan.shape[::-1], dtype=np.float32)
        return (rng.standard_normal(plan.shape[::-1]) * 0.01).astype(np.float32)
    n_blocks = plan.nbytes // _BLOCK[plan.kind][0]
    return random_blocks(plan.kind, n_blocks, plan.shape[0], rng)


def shape_file_name(shape: TargetShape, vocab_source: Path) -> str:
    digest = hashlib.sha256(f"{vocab_source.name}:{vocab_source.stat().st_size}".encode()).hexdigest()[:10]
    return f"random-{shape.name}-shape-timing-only-{digest}.gguf"


def ensure_shape_file(
    shape: TargetShape, vocab_source: Path, folder: Path, cancel: CancelToken = NEVER, progress=None
) -> Path:
    """The cached random-weight file for `shape`, written once (4.7 GB for 7B, 9.0 GB for 14B; about 26 s each here)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / shape_file_name(shape, vocab_source)
    if path.exists():
        return path
    partial = path.with_name(path.name + ".partial")
    try:
        write_shape_file(shape, vocab_source, partial, cancel, progress)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def write_shape_file(
    shape: TargetShape, vocab_source: Path, out: Path, cancel: CancelToken = NEVER, progress=None
) -> None:
    import gguf  # only here: gguf's reader and writer are needed for this one file

    source = gguf.GGUFReader(str(vocab_source))
    vocab = len(source.fields["tokenizer.ggml.tokens"].contents())
    writer = gguf.GGUFWriter(str(out), "qwen2")
    _add_metadata(writer, shape, source)
    plans = tensor_plan(shape, vocab)
    for plan in plans:
        _add_info(writer, plan, gguf)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.default_rng(0)
    for done, plan in enumerate(plans, 1):
        cancel.raise_if_cancelled()
        writer.write_tensor_data(tensor_data(plan, rng))
        if progress is not None:
            progress(done, len(plans))
    writer.close()


def _add_info(writer, plan: TensorPlan, gguf) -> None:
    if plan.kind == "F32":
        writer.add_tensor_info(plan.name, plan.shape[::-1], np.dtype(np.float32), plan.nbytes)
        return
    rows = int(np.prod(plan.shape[1:], dtype=np.int64))
    byte_shape = (*plan.shape[1:][::-1], plan.nbytes // rows)
    writer.add_tensor_info(
        plan.name, byte_shape, np.dtype(np.uint8), plan.nbytes, raw_dtype=gguf.GGMLQuantizationType[plan.kind]
    )


def _add_metadata(writer, shape: TargetShape, source) -> None:
    import gguf

    arch = "qwen2"
    writer.add_name(f"{shape.label} shape, {TIMING_ONLY}")
    writer.add_uint32(f"{arch}.block_count", shape.layers)
    writer.add_uint32(f"{arch}.context_length", shape.context)
    writer.add_uint32(f"{arch}.embedding_length", shape.hidden)
    writer.add_uint32(f"{arch}.feed_forward_length", shape.ffn)
    writer.add_uint32(f"{arch}.attention.head_count", shape.heads)
    writer.add_uint32(f"{arch}.attention.head_count_kv", shape.kv_heads)
    writer.add_float32(f"{arch}.rope.freq_base", shape.rope_base)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_uint32("general.file_type", int(gguf.LlamaFileType.MOSTLY_Q4_K_M))
    writer.add_uint32("general.quantization_version", 2)
    for key, value, vtype, sub_type in _tokenizer_fields(source):
        writer.add_key_value(key, value, vtype, sub_type)


def _tokenizer_fields(source) -> Iterator[tuple]:
    """The vocabulary, merges, special ids and chat template of the source file, as they are."""
    for key, field in source.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub_type = field.types[1] if len(field.types) > 1 else None
        yield key, field.contents(), vtype, sub_type
