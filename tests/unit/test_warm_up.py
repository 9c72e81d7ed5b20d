"""The load's warm-up feeds each model its own token ids: a draft of another family is warmed up
with the warm-up text in its own vocabulary, never with the target's ids, which may lie past it."""

from __future__ import annotations

import pytest

from engine.core.settings import ModelSettings
from engine.llama.native import LlamaModel
from engine.pipeline import Engine
from engine.pipeline.engine_open import WARM_UP_TOKENS, warm_up
from tests.fixtures.tiny_gguf import DEFAULT_MERGES, write_tiny_gguf_other_vocab, write_tiny_qwen2_gguf

# Merges that make "warm up" two tokens past the other vocabulary's end: ids 278 and 280 of the
# target's 284, where the other-vocabulary draft has 266 rows and reads it as seven byte tokens.
WARM_MERGES = (("w", "a"), ("wa", "r"), ("war", "m"), ("Ġ", "u"), ("Ġu", "p"))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warm-up")
    target = write_tiny_qwen2_gguf(folder / "wide-target.gguf", merges=DEFAULT_MERGES + WARM_MERGES)
    draft = write_tiny_gguf_other_vocab(folder / "other-vocab.gguf")
    return target, draft


@pytest.fixture(scope="module")
def vocabularies(models):
    target, draft = (LlamaModel(path, vocab_only=True) for path in models)
    yield target, draft
    target.close()
    draft.close()


class Recorder:
    """The scorer and the target's runtime, as far as warm_up uses them: what each was fed."""

    def __init__(self, model: LlamaModel):
        self.model = self
        self.tokenize = model.tokenize
        self.context = self
        self.prefilled: list[int] = []
        self.scored: list[int] = []
        self.cleared = False

    def prefill(self, tokens, positions) -> None:
        self.prefilled = tokens.tolist()

    def clear(self) -> None:
        self.cleared = True

    def score(self, tokens, params) -> None:
        self.scored = list(tokens)


def test_the_fixture_target_tokenizes_the_warm_up_past_the_drafts_vocabulary(vocabularies):
    target, draft = vocabularies
    assert max(target.tokenize("warm up", parse_special=False)) >= draft.n_vocab


def test_a_draft_of_another_family_is_warmed_up_in_its_own_ids(vocabularies):
    target, draft = vocabularies
    runtime = Recorder(target)
    warm_up(runtime, runtime, draft)
    assert (
        runtime.prefilled
        == (target.tokenize("warm up", parse_special=False) * WARM_UP_TOKENS)[:WARM_UP_TOKENS]
    )
    assert runtime.cleared
    assert (
        runtime.scored == (draft.tokenize("warm up", parse_special=False) * WARM_UP_TOKENS)[:WARM_UP_TOKENS]
    )
    assert max(runtime.scored) < draft.n_vocab


def test_a_draft_of_the_targets_vocabulary_reads_the_targets_ids(vocabularies):
    target, _draft = vocabularies
    runtime = Recorder(target)
    warm_up(runtime, runtime, None)
    assert runtime.scored == runtime.prefilled and len(runtime.scored) == WARM_UP_TOKENS


def test_an_engine_with_a_draft_of_another_family_loads(models, cache_home):
    """Before the fix the warm-up handed the draft the target's ids 278 and 280, and the load
    failed: "the prompt holds token id 280, past the draft's vocabulary of 266 tokens"."""
    target, draft = models
    engine = Engine.load(
        ModelSettings(target_path=target, draft_path=draft, n_ctx=512, n_batch=64, n_threads=1)
    )
    try:
        assert engine.info.selection == "spans"
    finally:
        engine.close()
