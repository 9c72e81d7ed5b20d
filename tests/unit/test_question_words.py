"""The question's words as a second ranking of the chunks (BM25), beside the draft's scores."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from engine.core.settings import RunSettings
from engine.draft.question_words import bm25_chunk_scores, chunk_texts, percentiles, ranked_with_words, words
from engine.llama.prompt import PreparedPrompt, PromptParts
from engine.pipeline.selection_plan import plan_request_selection

FILLER = [
    "the cache keeps items in memory",
    "a request reads the file",
    "values are stored per key",
    "threads wait for the lock",
    "the loop runs until done",
    "errors are logged and raised",
]


def test_words_are_lower_cased_and_identifiers_also_give_their_parts():
    assert words("PERMANENT_SESSION_LIFETIME = 31") == [
        "permanent",
        "session",
        "lifetime",
        "permanent_session_lifetime",
        "31",
    ]
    assert words("lfuCache(maxsize)") == ["lfu", "cache", "lfucache", "maxsize"]
    assert words("plain words, no identifiers") == ["plain", "words", "no", "identifiers"]


def test_chunk_texts_run_from_each_chunks_first_token_to_the_next_chunks():
    assert chunk_texts("abcdefghij", [0, 2, 4, 6, 8], 2) == ["abcd", "efgh", "ij"]
    assert chunk_texts("abcdefghij", [0, 2, 4, 6, 8], 8) == ["abcdefghij"]


def test_the_chunk_sharing_the_questions_rare_words_scores_highest_and_the_question_gets_nothing():
    chunks = [
        *FILLER,
        "PERMANENT_SESSION_LIFETIME: the session lifetime, 31 days",
        *FILLER,
        "What is the permanent session lifetime?",
    ]
    scores = bm25_chunk_scores(
        chunks, "What is the permanent session lifetime?", first_unscored=len(chunks) - 1
    )
    assert int(np.argmax(scores)) == len(FILLER)
    assert scores[-1] == 0.0
    assert np.count_nonzero(scores) == 1  # "what", "is", "the": stop words or nowhere else


def test_a_question_of_stop_words_only_matches_nothing():
    assert not bm25_chunk_scores(FILLER, "is it the?", first_unscored=len(FILLER)).any()


def test_percentiles_run_from_0_to_1_in_score_order():
    assert percentiles(np.array([0.3, 0.1, 0.9, 0.5])).tolist() == pytest.approx([1 / 3, 0, 1, 2 / 3])


def test_the_words_lift_a_matching_chunk_above_the_draft_s_middle_and_leave_the_rest_in_draft_order():
    draft = np.array([0.9, 0.5, 0.4, 0.3, 0.1])
    word = np.array([0.0, 0.0, 0.0, 0.0, 2.0])
    ranked = ranked_with_words(draft, word, 1.0)
    # the draft's last, best by the words: level with the draft's best (1.0), above all the others
    assert np.argsort(-ranked, kind="stable").tolist() == [0, 4, 1, 2, 3]
    assert ranked_with_words(draft, word, 0.0).tolist() == draft.tolist()
    assert ranked_with_words(draft, np.zeros(5), 1.0).tolist() == draft.tolist()  # no match: the draft's own


def tiny_prompt(question: str) -> tuple[PreparedPrompt, list[int], np.ndarray]:
    """A prompt of 10-char tokens, 4 per chunk: filler chunks, one chunk that holds the answer's words,
    then the question's chunk. The draft scores the filler highest and the answer's chunk lowest."""
    pieces = [f"{FILLER[i % len(FILLER)]:<40}"[:40] for i in range(12)]
    pieces[7] = f"{'LFU_CACHE decorator: lfu_cache(maxsize)':<40}"
    document = "".join(pieces)
    parts = PromptParts(prefix="", document=document, gap="", question=f"{question:<40}"[:40], tail="")
    n_tokens = len(parts.text) // 10
    offsets = list(range(0, len(parts.text), 10))
    prompt = PreparedPrompt(parts, np.arange(n_tokens, dtype=np.int32), (0, len(document) // 10))
    importance = np.linspace(1.0, 0.5, n_tokens)
    importance[7 * 4 : 8 * 4] = 0.01
    return prompt, offsets, importance


@pytest.mark.parametrize("keep", [0.25, "auto"])
def test_a_selection_with_the_question_words_keeps_the_chunk_the_draft_ranked_last(keep):
    prompt, offsets, importance = tiny_prompt("Which decorator caches LFU?")
    with_words = plan_request_selection(
        importance, prompt, RunSettings(keep=keep, chunk_size=4), None, [], offsets
    )
    draft_only = plan_request_selection(
        importance, prompt, RunSettings(keep=keep, chunk_size=4, question_words=0), None, [], offsets
    )
    assert 7 in with_words.kept and 7 not in draft_only.kept
    assert with_words.keep == draft_only.keep  # keep=auto reads the draft's scores alone
    assert len(with_words.kept) == len(draft_only.kept)


def test_bm25s_debug_lines_stay_out_of_the_users_stderr():
    bm25_chunk_scores(FILLER, "which lock?", first_unscored=len(FILLER))
    # bm25s sets its own logger to DEBUG on import: every index build would print a line
    assert logging.getLogger("bm25s").getEffectiveLevel() >= logging.WARNING
