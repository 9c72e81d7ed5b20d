"""The span path on two real tokenizers: the default Qwen draft's vocabulary and Gemma 3 270M's
(`specprefill models --assemble gemma3-270m`), each read vocab-only with llama.cpp."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.spans import spans_of_tokens, token_char_spans, tokens_overlapping
from engine.draft.selection import kept_token_indices
from engine.llama.native import LlamaModel
from engine.llama.prompt import render_parts, tokenize_parts
from engine.models import defaults
from engine.pipeline.span_selection import draft_prompt, map_kept, prompt_token_spans

pytestmark = pytest.mark.real_models
CHUNK = 32
SYSTEM = "Answer from the document."
# Prose, code and the characters byte-level BPE splits (CJK, emoji, accents).
TEXTS = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Co", "Cn")), min_size=1, max_size=400
)
ASCII = st.text(alphabet=st.characters(min_codepoint=9, max_codepoint=126), min_size=1, max_size=400)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def vocab(path, what: str) -> LlamaModel:
    if path is None or not path.is_file():
        pytest.skip(f"{what} is not assembled (or fails its hash): {what} tests need its GGUF")
    return LlamaModel(path, vocab_only=True)


@pytest.fixture(scope="module")
def qwen():
    spec = defaults.DRAFT
    model = vocab(
        spec.path if defaults.is_verified(spec) else None, "the default draft (specprefill models --prepare)"
    )
    yield model
    model.close()


@pytest.fixture(scope="module")
def gemma():
    model = vocab(
        defaults.verified_optional_path("gemma3-270m"),
        "Gemma 3 270M (specprefill models --assemble gemma3-270m)",
    )
    yield model
    model.close()


def text_spans(model: LlamaModel, text: str):
    tokens = model.tokenize(text, parse_special=False)
    pieces = [model.token_piece(t) for t in tokens]
    assert b"".join(pieces) == text.encode("utf-8")  # the pieces are the text's bytes: offsets are exact
    return token_char_spans(text, [len(p) for p in pieces])


def covered(spans) -> set[int]:
    return {c for a, b in spans for c in range(a, b)}


def random_chunks(data, n_tokens: int) -> list[int]:
    n_chunks = math.ceil(n_tokens / CHUNK)
    return sorted(data.draw(st.sets(st.integers(0, n_chunks - 1), min_size=1)))


@FAST
@given(text=TEXTS, data=st.data())
def test_every_kept_span_of_qwen_tokens_is_covered_by_the_gemma_tokens_taken(qwen, gemma, text, data):
    draft = text_spans(qwen, text)
    target = text_spans(gemma, text)
    kept = kept_token_indices(random_chunks(data, len(draft)), CHUNK, len(draft))
    spans = spans_of_tokens(draft, kept)
    taken = tokens_overlapping(target, spans, len(text))
    assert covered(spans) <= covered(target[taken])


@FAST
@given(document=TEXTS, question=ASCII, data=st.data())
def test_the_template_system_prompt_and_question_are_kept_whole(qwen, gemma, document, question, data):
    if not question.strip():
        question = "which?"
    target = tokenize_parts(gemma, render_parts(gemma, document, question, SYSTEM))
    draft = draft_prompt(qwen, target, SYSTEM)
    kept = kept_token_indices(random_chunks(data, draft.n_tokens), CHUNK, draft.n_tokens)
    taken = set(
        map_kept(draft, prompt_token_spans(qwen, draft), kept, target, prompt_token_spans(gemma, target))
    )
    start, end = target.doc_token_span
    assert set(range(start)) | set(range(end, target.n_tokens)) <= taken


def token_and_span_paths(model: LlamaModel, document: str, data):
    prompt = tokenize_parts(model, render_parts(model, document, "What does it say?", SYSTEM))
    spans = prompt_token_spans(model, prompt)
    chunks = sorted(
        {
            0,
            *random_chunks(data, prompt.n_tokens),
            *range(prompt.tail_start // CHUNK, math.ceil(prompt.n_tokens / CHUNK)),
        }
    )
    by_tokens = kept_token_indices(chunks, CHUNK, prompt.n_tokens)
    return spans, set(by_tokens.tolist()), set(map_kept(prompt, spans, by_tokens, prompt, spans).tolist())


@FAST
@given(document=ASCII, data=st.data())
def test_with_one_vocabulary_the_span_path_keeps_the_token_paths_tokens(qwen, document, data):
    _, by_tokens, by_spans = token_and_span_paths(qwen, document, data)
    assert by_spans == by_tokens


@FAST
@given(document=TEXTS, data=st.data())
def test_with_one_vocabulary_the_span_path_adds_only_tokens_sharing_a_split_character(qwen, document, data):
    spans, by_tokens, by_spans = token_and_span_paths(qwen, document, data)
    assert by_tokens <= by_spans
    kept_chars = covered(spans[sorted(by_tokens)])
    for extra in by_spans - by_tokens:  # a byte-level token holding part of a kept character
        assert covered([spans[extra]]) & kept_chars


def test_a_gemma_gguf_without_a_chat_template_gets_its_familys_turns(gemma):
    assert gemma.chat_template() is None
    rendered = gemma.apply_chat_template([("system", "S"), ("user", "U")])
    assert rendered.startswith("<start_of_turn>user\n") and rendered.endswith("<start_of_turn>model\n")
    assert np.all(np.asarray(gemma.tokenize(rendered, parse_special=True)[:1]) == 105)  # <start_of_turn>
