"""One request's chunk scores and protected chunks are computed once: keep=auto's choice and the
selection read the same ones (engine.pipeline.selection_plan, engine.draft.selection)."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.settings import RunSettings
from engine.draft import selection
from engine.draft.selection import plan_selection, scored_chunks
from engine.llama.prompt import PreparedPrompt, PromptParts
from engine.pipeline.selection_plan import plan_request_selection

N_TOKENS = 400


def prompt() -> PreparedPrompt:
    parts = PromptParts(prefix="", document="x" * (N_TOKENS - 4), gap="", question="Which value?", tail="")
    return PreparedPrompt(parts, np.arange(N_TOKENS, dtype=np.int32), (0, N_TOKENS - 4))


def importance() -> np.ndarray:
    return np.random.default_rng(0).random(N_TOKENS)


@pytest.fixture
def counted(monkeypatch):
    calls = {"chunk_scores": 0, "protected_chunks": 0}
    for name in calls:
        real = getattr(selection, name)

        def count(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(selection, name, count)
    return calls


@pytest.mark.parametrize("keep", ["auto", 0.3])
@pytest.mark.parametrize("words", [0.0, 0.5])
def test_a_request_computes_its_chunk_scores_and_protected_chunks_once(counted, keep, words):
    settings = RunSettings(keep=keep, chunk_size=8, question_words=words)
    plan_request_selection(importance(), prompt(), settings, None, [], list(range(N_TOKENS)))
    assert counted == {"chunk_scores": 1, "protected_chunks": 1}


def test_chunk_scores_handed_in_are_not_computed_again(counted):
    settings = RunSettings(keep="auto", chunk_size=8, question_words=0)
    chunked = scored_chunks(importance(), 8, prompt().tail_start)
    for budget in (None, 200, 100):
        plan_request_selection(importance(), prompt(), settings, budget, [], [], chunked=chunked)
    assert counted == {"chunk_scores": 1, "protected_chunks": 1}


def test_a_plan_from_handed_in_chunk_scores_is_the_plan_computed_alone():
    imp, tail = importance(), N_TOKENS - 20
    alone = plan_selection(imp, 8, 0.4, tail, 160)
    handed = plan_selection(imp, 8, 0.4, tail, 160, chunked=scored_chunks(imp, 8, tail))
    np.testing.assert_array_equal(alone[0], handed[0])
    assert alone[1:3] == handed[1:3]
    np.testing.assert_array_equal(alone[3], handed[3])
