"""Random-weight targets with a real model's shape (`bench --target-shape`): they load, decode to
finite logits, carry the source's vocabulary, say "timing only", and match a real file's layout."""

from __future__ import annotations

import numpy as np
import pytest

from engine.llama.native import LlamaContext, LlamaModel
from engine.models import defaults
from engine.models.shapes import (
    SHAPES,
    TIMING_ONLY,
    TargetShape,
    ensure_shape_file,
    random_blocks,
    shape_by_name,
    tensor_plan,
    uses_more_bits,
)
from engine.pipeline.vocab_check import compare_files
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf

# The smallest shape Q4_K allows: rows of 256 weights.
TINY = TargetShape("tiny", "Tiny", layers=2, hidden=256, heads=4, kv_heads=2, ffn=512, context=512)


@pytest.fixture(scope="module")
def vocab_source(tmp_path_factory):
    return write_tiny_qwen2_gguf(tmp_path_factory.mktemp("source") / "source.gguf")


@pytest.fixture(scope="module")
def tiny_file(vocab_source, tmp_path_factory):
    return ensure_shape_file(TINY, vocab_source, tmp_path_factory.mktemp("shapes"))


def test_the_file_loads_and_decodes_to_finite_logits(tiny_file):
    model = LlamaModel(tiny_file)
    try:
        context = LlamaContext(model, n_ctx=128, n_batch=64, n_threads=1)
        try:
            tokens = np.array(
                model.tokenize("the quick brown fox jumps over", parse_special=False), dtype=np.int32
            )
            assert context.decode(tokens, np.arange(len(tokens), dtype=np.int32), want_logits=True) == 0
            logits = context.last_logits()
            assert np.isfinite(logits).all() and logits.std() > 0
        finally:
            context.close()
    finally:
        model.close()


def test_it_keeps_the_sources_vocabulary_and_says_timing_only(tiny_file, vocab_source):
    assert compare_files(tiny_file, vocab_source).verdict == "identical"
    assert "timing-only" in tiny_file.name
    import gguf

    name = gguf.GGUFReader(str(tiny_file)).fields["general.name"].contents()
    assert TIMING_ONLY in name


def test_a_second_call_reuses_the_file(tiny_file, vocab_source):
    mtime = tiny_file.stat().st_mtime_ns
    assert ensure_shape_file(TINY, vocab_source, tiny_file.parent) == tiny_file
    assert tiny_file.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("kind, levels", [("Q4_K", 16), ("Q6_K", 64)])
def test_random_blocks_dequantize_to_zero_mean_and_unit_row_variance(kind, levels):
    import gguf
    from gguf.quants import dequantize

    row = 1024
    blocks = random_blocks(kind, 64 * row // 256, row, np.random.default_rng(0))
    weights = dequantize(blocks.reshape(64, -1), gguf.GGMLQuantizationType[kind])
    assert weights.shape == (64, row)
    assert abs(weights.mean()) < 0.2 / np.sqrt(row)
    assert weights.std() * np.sqrt(row) == pytest.approx(1.0, rel=0.15)


def test_q4_k_m_gives_the_first_and_last_eighth_more_bits():
    heavy = [i for i in range(28) if uses_more_bits(i, 28)]
    assert heavy[:3] == [0, 1, 2] and heavy[-3:] == [25, 26, 27]
    assert 4 not in heavy and 5 in heavy


def test_unknown_shapes_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="qwen2.5-7b"):
        shape_by_name("llama-70b")
    assert shape_by_name("Qwen2.5-7B") is SHAPES["qwen2.5-7b"]


@pytest.mark.real_models
def test_the_1_5b_plan_matches_the_real_default_targets_tensors():
    import gguf

    if not defaults.TARGET.path.is_file():
        pytest.skip("the default target is not assembled")
    real = gguf.GGUFReader(str(defaults.TARGET.path))
    real_tensors = {t.name: (tuple(int(d) for d in t.shape), t.tensor_type.name) for t in real.tensors}
    plan = tensor_plan(SHAPES["qwen2.5-1.5b"], vocab=real_tensors["token_embd.weight"][0][1])
    assert {p.name for p in plan} == set(real_tensors)
    assert all(real_tensors[p.name][0] == p.shape for p in plan)
    real_bytes = sum(int(t.n_bytes) for t in real.tensors)
    assert sum(p.nbytes for p in plan) == pytest.approx(real_bytes, rel=0.01)
