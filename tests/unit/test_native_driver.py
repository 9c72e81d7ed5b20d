"""The native llama.cpp driver (engine.llama.native) and TargetRuntime, on a tiny random Qwen2 GGUF."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import Cancelled, RuntimeFailure
from engine.llama.native import DECODE_ERRORS, LlamaBatch, LlamaContext, LlamaModel, decode_error_message
from engine.llama.runtime import TargetRuntime
from tests.fixtures.tiny_gguf import CHATML_TEMPLATE, build_vocab, bytes_to_unicode, write_tiny_qwen2_gguf

GAPPED = np.array([0, 1, 2, 10, 11, 30], dtype=np.int32)


@pytest.fixture(scope="module")
def gguf_path(tmp_path_factory):
    return write_tiny_qwen2_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf", seed=7)


@pytest.fixture(scope="module")
def model(gguf_path):
    m = LlamaModel(gguf_path)
    yield m
    m.close()


def make_runtime(model: LlamaModel, n_ctx: int = 512, n_batch: int = 64) -> TargetRuntime:
    return TargetRuntime(model, LlamaContext(model, n_ctx=n_ctx, n_batch=n_batch, n_threads=1))


@pytest.fixture(scope="module")
def runtime(model):
    rt = make_runtime(model)
    yield rt
    rt.context.close()


@pytest.fixture(scope="module")
def six_tokens(model):
    tokens = model.tokenize("Hello the world, it is", parse_special=False)[:6]
    assert len(tokens) == 6
    return np.array(tokens, dtype=np.int32)


# -- the model and its vocabulary --------------------------------------------------------


def test_model_loads_with_its_metadata(model):
    tokens, _types, _merges = build_vocab()
    assert model.n_vocab == len(tokens)
    assert model.n_ctx_train() == 512
    assert "qwen2" in model.description()
    assert model.chat_template() == CHATML_TEMPLATE


def test_vocab_only_load_has_the_same_vocabulary(gguf_path, model):
    vocab = LlamaModel(gguf_path, vocab_only=True)
    try:
        assert vocab.n_vocab == model.n_vocab
        assert [vocab.token_text(t) for t in range(vocab.n_vocab)] == [
            model.token_text(t) for t in range(model.n_vocab)
        ]
    finally:
        vocab.close()


def test_a_file_that_is_not_gguf_is_a_model_error(tmp_path):
    from engine.core.errors import ModelError

    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"definitely not a gguf file" * 10)
    with pytest.raises(ModelError, match="bogus.gguf"):
        LlamaModel(bogus)


@pytest.mark.parametrize(
    "text",
    [
        "Hello the world, testing in is!",
        "  two  spaces, tabs\tand\nnewlines\n\n",
        'digits 0123456789 and symbols ~!@#$%^&*()_+{}|:"<>?',
    ],
)
def test_tokenize_then_pieces_round_trip(model, text):
    tokens = model.tokenize(text, parse_special=False)
    assert tokens
    assert all(0 <= t < model.n_vocab for t in tokens)
    assert b"".join(model.token_piece(t) for t in tokens) == text.encode()


def test_merges_are_applied(model):
    tokens, _types, _merges = build_vocab()
    # " the" is one token ("Ġthe") built from the merges Ġ+t, h+e, Ġt+he.
    assert model.tokenize(" the", parse_special=False) == [tokens.index("Ġthe")]
    # A single byte maps to the byte token whose id is the byte value.
    space = bytes_to_unicode()[ord(" ")]
    assert model.tokenize(" ", parse_special=False) == [tokens.index(space)] == [ord(" ")]


def test_special_tokens_parse_only_when_asked(model):
    tokens, _types, _merges = build_vocab()
    im_end = tokens.index("<|im_end|>")
    assert model.tokenize("<|im_end|>", parse_special=True) == [im_end]
    literal = model.tokenize("<|im_end|>", parse_special=False)
    assert im_end not in literal and len(literal) > 1
    assert model.is_eog(im_end)
    assert not model.is_eog(ord("a"))
    assert model.token_piece(im_end) == b"<|im_end|>"


def test_apply_chat_template_renders_chatml(model):
    rendered = model.apply_chat_template([("system", "Be brief."), ("user", "What is 2+2?")])
    assert rendered == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_apply_chat_template_grows_its_buffer_for_long_messages(model):
    long = "x" * 5000
    rendered = model.apply_chat_template([("user", long)])
    assert rendered == f"<|im_start|>user\n{long}<|im_end|>\n<|im_start|>assistant\n"


# -- the batch ----------------------------------------------------------------------------


def test_batch_fill_writes_tokens_positions_and_logit_flags():
    batch = LlamaBatch(8)
    try:
        batch.fill(np.array([5, 6, 7], np.int32), np.array([0, 5, 9], np.int32), want_logits_last=True)
        s = batch.struct
        assert s.n_tokens == 3
        assert [s.token[i] for i in range(3)] == [5, 6, 7]
        assert [s.pos[i] for i in range(3)] == [0, 5, 9]
        assert [s.logits[i] for i in range(3)] == [0, 0, 1]
        assert all(s.n_seq_id[i] == 1 and s.seq_id[i][0] == 0 for i in range(8))

        # A refill with fewer tokens resets the logit flags it uses.
        batch.fill(np.array([9, 8], np.int32), np.array([20, 21], np.int32), want_logits_last=False)
        assert s.n_tokens == 2
        assert [s.token[i] for i in range(2)] == [9, 8]
        assert [s.pos[i] for i in range(2)] == [20, 21]
        assert [s.logits[i] for i in range(2)] == [0, 0]
    finally:
        batch.close()
        batch.close()  # closing twice is harmless


def test_batch_rejects_overflow_and_mismatched_lengths():
    batch = LlamaBatch(4)
    try:
        with pytest.raises(ValueError, match="capacity 4"):
            batch.fill(np.arange(5, dtype=np.int32), np.arange(5, dtype=np.int32), True)
        with pytest.raises(ValueError):
            batch.fill(np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32), True)
    finally:
        batch.close()


# -- positions --------------------------------------------------------------------------


def test_patched_build_accepts_gapped_positions(runtime):
    assert runtime.accepts_gapped_positions() is True


def test_gapped_positions_change_the_logits(runtime, six_tokens):
    gapped = runtime.prefill(six_tokens, GAPPED)
    contiguous = runtime.prefill(six_tokens, np.arange(6, dtype=np.int32))
    assert gapped.shape == contiguous.shape == (runtime.model.n_vocab,)
    assert np.all(np.isfinite(gapped))
    assert np.abs(gapped - contiguous).max() > 1e-2  # positions matter
    # Not a degenerate model: the logits are spread out.
    assert gapped.std() > 0.5


def test_gapped_prefill_is_deterministic_and_independent_of_batching(model, runtime, six_tokens):
    whole = runtime.prefill(six_tokens, GAPPED)
    again = runtime.prefill(six_tokens, GAPPED)
    np.testing.assert_array_equal(whole, again)

    small = make_runtime(model, n_batch=2)  # three batches, gaps inside and across them
    try:
        split = small.prefill(six_tokens, GAPPED)
    finally:
        small.context.close()
    np.testing.assert_allclose(split, whole, rtol=0, atol=1e-4)


def test_generate_continues_after_the_last_gapped_position(model, runtime, six_tokens, monkeypatch):
    logits = runtime.prefill(six_tokens, GAPPED)
    seen: list[list[int]] = []
    decode = runtime.context.decode

    def spy(tokens, positions, want_logits):
        seen.append(list(positions))
        return decode(tokens, positions, want_logits)

    monkeypatch.setattr(runtime.context, "decode", spy)
    generated = list(runtime.generate(logits, 31, 4))
    monkeypatch.undo()

    assert len(generated) == 4
    assert generated[0].token == int(np.argmax(logits))
    # Each token after the first is decoded at the next position: 31, 32, 33.
    assert seen == [[31], [32], [33]]

    # The second token equals what one prefill of the same tokens at the same positions predicts.
    tokens = np.append(six_tokens, generated[0].token).astype(np.int32)
    positions = np.append(GAPPED, 31).astype(np.int32)
    assert int(np.argmax(runtime.prefill(tokens, positions))) == generated[1].token


def test_greedy_decoding_is_not_one_token_repeated(runtime, six_tokens):
    logits = runtime.prefill(six_tokens, np.arange(6, dtype=np.int32))
    generated = [g.token for g in runtime.generate(logits, 6, 12)]
    assert len(generated) == 12
    assert len(set(generated)) >= 3


def test_generate_stops_at_max_new_tokens_and_at_the_context_end(model, six_tokens):
    rt = make_runtime(model, n_ctx=256, n_batch=64)
    try:
        logits = rt.prefill(six_tokens, np.arange(6, dtype=np.int32))
        assert len(list(rt.generate(logits, 6, 3))) == 3
        # Starting at the last position of the window: one token from the prefill's logits, no decode.
        logits = rt.prefill(six_tokens, np.array([0, 1, 2, 3, 4, 255], np.int32))
        assert len(list(rt.generate(logits, 256, 10))) == 1
    finally:
        rt.context.close()


def test_prefill_of_nothing_is_a_value_error(runtime):
    with pytest.raises(ValueError):
        runtime.prefill(np.zeros(0, np.int32), np.zeros(0, np.int32))


# -- cancel ---------------------------------------------------------------------------


def test_prefill_with_a_cancelled_token_raises_cancelled(runtime, six_tokens):
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        runtime.prefill(six_tokens, GAPPED, token)


def test_cancel_between_prefill_batches(model, six_tokens):
    rt = make_runtime(model, n_batch=2)
    try:
        token = CancelToken()
        steps = rt.iter_prefill(six_tokens, GAPPED, token)
        assert next(steps) == (2, 6)
        token.cancel()
        with pytest.raises(Cancelled):
            next(steps)
        # The runtime is usable again after a cancel, and gives the usual answer.
        np.testing.assert_allclose(rt.prefill(six_tokens, GAPPED), rt.prefill(six_tokens, GAPPED))
    finally:
        rt.context.close()


def test_cancel_inside_a_decode_aborts_through_the_callback(runtime, six_tokens):
    token = CancelToken()
    token.cancel()
    runtime.context.clear()
    runtime.context.cancel = token  # the abort callback reads this token while llama_decode runs
    try:
        with pytest.raises(Cancelled):
            runtime._decode(six_tokens, GAPPED, True)
    finally:
        runtime.context.cancel = NEVER
    assert runtime.prefill(six_tokens, GAPPED).shape == (runtime.model.n_vocab,)


def test_generate_checks_cancel_between_tokens(runtime, six_tokens):
    logits = runtime.prefill(six_tokens, GAPPED)
    token = CancelToken()
    stream = runtime.generate(logits, 31, 10, token)
    next(stream)
    token.cancel()
    with pytest.raises(Cancelled):
        next(stream)


# -- errors ---------------------------------------------------------------------------


def test_decode_error_messages():
    assert "KV cache" in decode_error_message(1) and "context" in decode_error_message(1)
    assert decode_error_message(2) == "cancelled"
    assert "rejected" in decode_error_message(-1)
    for rc in (-3, 3, 42):
        message = decode_error_message(rc)
        assert str(rc) in message and message not in DECODE_ERRORS.values()


def test_prefilling_more_tokens_than_the_context_is_a_runtime_failure(model, six_tokens):
    rt = make_runtime(model, n_ctx=256, n_batch=64)
    try:
        tokens = np.resize(six_tokens, 300).astype(np.int32)
        with pytest.raises(RuntimeFailure) as err:
            rt.prefill(tokens, np.arange(300, dtype=np.int32))
        assert str(err.value) == decode_error_message(1)
        # No crash, and the context still works afterwards.
        assert rt.prefill(six_tokens, GAPPED).shape == (model.n_vocab,)
    finally:
        rt.context.close()


def test_invalid_token_and_decreasing_positions_are_runtime_failures(runtime, six_tokens):
    with pytest.raises(RuntimeFailure, match="rejected"):
        runtime.prefill(np.array([1, runtime.model.n_vocab + 10], np.int32), np.array([0, 1], np.int32))
    with pytest.raises(RuntimeFailure, match="rejected"):
        runtime.prefill(np.array([1, 2], np.int32), np.array([5, 3], np.int32))
    assert runtime.prefill(six_tokens, GAPPED).shape == (runtime.model.n_vocab,)


def test_closed_handles_refuse_use(gguf_path):
    m = LlamaModel(gguf_path)
    ctx = LlamaContext(m, n_ctx=256, n_batch=8, n_threads=1)
    ctx.close()
    ctx.close()
    with pytest.raises(RuntimeError, match="context is closed"):
        ctx.clear()
    m.close()
    m.close()
    with pytest.raises(RuntimeError, match="model is closed"):
        m.description()


# -- the fixture itself -------------------------------------------------------------------


def test_fixture_is_the_same_model_in_transformers(gguf_path, model, six_tokens):
    """llama.cpp and transformers read the tiny GGUF as the same network (tensor layout, norms, rope)."""
    import torch
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
    ).eval()
    assert hf.config.model_type == "qwen2"
    assert hf.config.vocab_size == model.n_vocab
    assert hf.config.num_hidden_layers == 2 and hf.config.num_key_value_heads == 2
    rt = make_runtime(model)
    try:
        expected = rt.prefill(six_tokens, np.arange(6, dtype=np.int32))
    finally:
        rt.context.close()
    with torch.no_grad():
        got = hf(torch.tensor([six_tokens.tolist()])).logits[0, -1].numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=0.05)
    assert int(np.argmax(got)) == int(np.argmax(expected))


def test_chunk_ranges_never_cross_the_split():
    from engine.core.steps import chunk_ranges

    assert chunk_ranges(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_ranges(0, 10, 4, split=6) == [(0, 4), (4, 6), (6, 10)]
    assert chunk_ranges(0, 10, 4, split=10) == [(0, 4), (4, 8), (8, 10)]  # a split at the end is no split
    assert chunk_ranges(6, 10, 4, split=6) == [(6, 10)]  # resuming at the split
    assert chunk_ranges(5, 5, 4) == []
    ranges = chunk_ranges(0, 1000, 64, split=517)
    assert ranges[0][0] == 0 and ranges[-1][1] == 1000
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous, nothing lost
    assert all(not (start < 517 < end) for start, end in ranges)
