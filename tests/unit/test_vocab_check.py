"""The vocabulary check's three verdicts on tiny generated vocabularies: identical, compatible (padding,
added specials) and different (another token, a reordered or moved one), through files and llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFWriter, TokenType

from engine.core.errors import ModelError
from engine.llama.native import LlamaModel
from engine.pipeline.diagnostics import check_vocab
from engine.pipeline.vocab_check import Vocab, compare_files, compare_vocabs, require_shared_vocab, vocab_of
from tests.fixtures.tiny_gguf import build_vocab, write_tiny_gguf_other_vocab, write_tiny_qwen2_gguf

NORMAL, CONTROL, UNUSED = int(TokenType.NORMAL), int(TokenType.CONTROL), int(TokenType.UNUSED)
BASE_TOKENS, BASE_TYPES, _ = build_vocab()


def write_vocab_gguf(path: Path, tokens: list[str], types: list[int]) -> Path:
    """A GGUF with a tokenizer and no tensors: all the check reads of a draft."""
    writer = GGUFWriter(str(path), "qwen2")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


def typed(tokens: list[str], types: list[int]) -> Vocab:
    return vocab_of(tokens, {i for i, kind in enumerate(types) if kind != NORMAL})


def padded(n: int) -> tuple[list[str], list[int]]:
    """The base vocabulary padded as a GGUF converter pads it: [PADi] tokens typed unused."""
    start = len(BASE_TOKENS)
    return BASE_TOKENS + [f"[PAD{i}]" for i in range(start, start + n)], BASE_TYPES + [UNUSED] * n


def with_specials(*names: str) -> tuple[list[str], list[int]]:
    return BASE_TOKENS + list(names), BASE_TYPES + [CONTROL] * len(names)


def reordered() -> tuple[list[str], list[int]]:
    tokens = list(BASE_TOKENS)
    tokens[100], tokens[101] = tokens[101], tokens[100]
    return tokens, list(BASE_TYPES)


BASE = typed(BASE_TOKENS, BASE_TYPES)


def test_the_same_tokens_are_identical():
    match = compare_vocabs(BASE, typed(list(BASE_TOKENS), list(BASE_TYPES)))
    assert match.verdict == "identical" and match.target_size == match.draft_size == len(BASE_TOKENS)


@pytest.mark.parametrize("side", ["target", "draft"])
def test_padding_on_either_side_is_compatible(side):
    other = typed(*padded(7))
    pair = (other, BASE) if side == "target" else (BASE, other)
    match = compare_vocabs(*pair)
    assert match.verdict == "compatible" and f"the {side} adds 7 padding or special tokens" in match.reason


def test_untyped_padding_is_recognised_by_its_text():
    tokens, _ = padded(3)
    assert compare_vocabs(vocab_of(tokens, set()), BASE).verdict == "compatible"


def test_added_special_tokens_are_compatible():
    assert (
        compare_vocabs(BASE, typed(*with_specials("<|fim_prefix|>", "<|fim_suffix|>"))).verdict
        == "compatible"
    )


def test_a_special_where_the_other_pads_is_compatible():
    target = typed(*with_specials("<|tool|>"))
    draft = typed(*padded(1))
    match = compare_vocabs(target, draft)
    assert match.verdict == "compatible" and "1 special tokens differ" in match.reason


def test_a_reordered_vocabulary_is_different():
    match = compare_vocabs(BASE, typed(*reordered()))
    assert match.verdict == "different" and "token 100" in match.reason


def test_an_ordinary_token_more_is_different():
    tokens, types = BASE_TOKENS + ["Ġnew"], BASE_TYPES + [NORMAL]
    match = compare_vocabs(BASE, typed(tokens, types))
    assert match.verdict == "different" and "ordinary token" in match.reason


def test_a_special_token_at_another_id_is_different():
    swapped = list(BASE_TOKENS)
    a, b = swapped.index("<|im_start|>"), swapped.index("<|im_end|>")
    swapped[a], swapped[b] = swapped[b], swapped[a]
    match = compare_vocabs(BASE, typed(swapped, list(BASE_TYPES)))
    assert match.verdict == "different"
    assert match.reason == f"'<|im_start|>' is token {a} in the target and {b} in the draft"


def test_another_merge_set_is_different(tmp_path):
    target = write_tiny_qwen2_gguf(tmp_path / "t.gguf")
    assert compare_files(target, write_tiny_gguf_other_vocab(tmp_path / "o.gguf")).verdict == "different"


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    model = LlamaModel(
        write_tiny_qwen2_gguf(tmp_path_factory.mktemp("vocab") / "target.gguf"), vocab_only=True
    )
    yield model
    model.close()


@pytest.mark.parametrize(
    "vocab, verdict",
    [
        ((BASE_TOKENS, BASE_TYPES), "identical"),
        (padded(5), "compatible"),
        (with_specials("<|extra|>"), "compatible"),
    ],
)
def test_the_loaded_target_accepts_a_matching_draft(target, tmp_path, vocab, verdict):
    draft = write_vocab_gguf(tmp_path / "draft.gguf", *vocab)
    assert require_shared_vocab(target, "target.gguf", draft, "draft.gguf").verdict == verdict


def test_the_loaded_target_refuses_a_different_draft_naming_the_verdict(target, tmp_path):
    draft = write_vocab_gguf(tmp_path / "reordered.gguf", *reordered())
    with pytest.raises(
        ModelError, match=r"reordered\.gguf.*target\.gguf.*different vocabularies \(token 100"
    ):
        require_shared_vocab(target, "target.gguf", draft, "reordered.gguf")


def test_doctor_names_the_verdict(tmp_path):
    target = write_tiny_qwen2_gguf(tmp_path / "t.gguf")
    same = check_vocab(target, write_tiny_qwen2_gguf(tmp_path / "d.gguf", seed=5))
    assert same.ok and same.text.startswith("identical: ")
    pad = check_vocab(target, write_vocab_gguf(tmp_path / "p.gguf", *padded(4)))
    assert pad.ok and pad.text.startswith("compatible: ")
    other = check_vocab(target, write_tiny_gguf_other_vocab(tmp_path / "o.gguf"))
    assert other.ok and other.text.startswith("different: ") and "character spans" in other.text
    assert "token ids" in same.text and "token ids" in pad.text
    assert check_vocab(target, None).text.startswith("not compared")
