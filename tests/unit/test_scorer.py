from dataclasses import replace

import numpy as np
import pytest
import torch

import engine.draft.question_rows as question_rows_module
import engine.draft.scorer as scorer_module
from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled, SettingsError
from engine.core.settings import DRAFT_QUESTION_ROWS_MAX, RunSettings
from engine.core.steps import run_to_end
from engine.draft.question_rows import question_recorder
from engine.draft.scorer import DraftPrefix, DraftScorer, ScoringParams
from tests.unit.tiny_models import tiny_qwen2


def tiny_pair():
    """A tiny draft and an eager-attention copy with the same weights: the naive reference."""
    model = tiny_qwen2()
    eager = tiny_qwen2(attn_implementation="eager")
    eager.load_state_dict(model.state_dict())
    return model, eager


def naive_pool(row: np.ndarray, kernel: int) -> np.ndarray:
    half = kernel // 2
    return np.array([row[max(0, i - half) : i + half + 1].mean() for i in range(len(row))])


def naive_importance(model_eager, tokens, lookahead_tokens, steps, kernel, mask=None, first_layer=0):
    """Full eager attention over prompt+look-ahead, then pool, max over layers (from first_layer on) x heads,
    mean over steps."""
    n = len(tokens)
    full = torch.tensor([tokens + lookahead_tokens])
    with torch.no_grad():
        out = model_eager(full, attention_mask=mask, output_attentions=True)
    return np.mean(
        [naive_row(out.attentions, n - 1 + j, n, kernel, first_layer) for j in range(steps)], axis=0
    )


def naive_row(attentions, query: int, n: int, kernel: int, first_layer: int) -> np.ndarray:
    """One query's attention over the first n keys, each head's row pooled, then the max over layers
    (from first_layer on) x heads."""
    rows = [
        att[0, h, query, :n].double().numpy() for att in attentions[first_layer:] for h in range(att.shape[1])
    ]
    return np.max([naive_pool(r, kernel) for r in rows], axis=0)


@pytest.mark.parametrize("prefill_chunk", [7, 1024])
def test_scores_match_naive_eager_attention(prefill_chunk):
    model, eager = tiny_pair()
    tokens = list(np.random.default_rng(1).integers(0, 96, size=45))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=prefill_chunk)
    result = scorer.score(tokens, ScoringParams(lookahead=5, kernel=5))
    assert result.steps == 5 and len(result.lookahead_tokens) == 5
    expected = naive_importance(eager, tokens, result.lookahead_tokens[:4], 5, kernel=5)
    np.testing.assert_allclose(result.importance, expected, atol=1e-5, rtol=0)


def test_first_layer_scores_only_the_later_layers():
    model, eager = tiny_pair()
    tokens = list(np.random.default_rng(3).integers(0, 96, size=45))
    scorer = DraftScorer(model, eos_ids=set())
    later = scorer.score(tokens, ScoringParams(lookahead=3, kernel=3, first_layer=1))
    every = scorer.score(tokens, ScoringParams(lookahead=3, kernel=3))
    expected = naive_importance(eager, tokens, later.lookahead_tokens[:2], 3, kernel=3, first_layer=1)
    np.testing.assert_allclose(later.importance, expected, atol=1e-5, rtol=0)
    assert later.lookahead_tokens == every.lookahead_tokens  # the look-ahead itself is unchanged
    assert not np.allclose(later.importance, every.importance, atol=1e-4)


def naive_question_importance(model_eager, tokens, n_rows, kernel, first_layer=0):
    """Each of the n_rows queries before the last prompt token: its causal eager attention over the
    prompt, pooled, max over layers (from first_layer on) x heads; then the mean over those rows."""
    n = len(tokens)
    with torch.no_grad():
        out = model_eager(torch.tensor([tokens]), output_attentions=True)
    return np.mean(
        [naive_row(out.attentions, i, n, kernel, first_layer) for i in range(n - 1 - n_rows, n - 1)], axis=0
    )


@pytest.mark.parametrize("prefill_chunk,first_layer", [(7, 0), (1024, 1)])
def test_question_rows_add_the_questions_own_attention(prefill_chunk, first_layer):
    """The mean is over the look-ahead's steps and the question's rows alike."""
    model, eager = tiny_pair()
    tokens = list(np.random.default_rng(4).integers(0, 96, size=45))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=prefill_chunk, window_sinks=2)
    params = ScoringParams(lookahead=3, kernel=3, first_layer=first_layer)
    plain = scorer.score(tokens, params)
    with_rows = scorer.score(tokens, replace(params, question_rows=9))
    expected = (3 * plain.importance + 9 * naive_question_importance(eager, tokens, 9, 3, first_layer)) / 12
    np.testing.assert_allclose(with_rows.importance, expected, atol=1e-5, rtol=0)
    assert with_rows.lookahead_tokens == plain.lookahead_tokens


def test_question_rows_read_the_keys_a_windowed_prefill_cuts():
    """A windowed prefill hides the middle keys from the question's tokens; their rows still score them.
    With one layer, queries and keys come from the embeddings alone, so the window changes nothing."""
    model = tiny_qwen2()
    model.model.layers = model.model.layers[:1]
    model.config.num_hidden_layers = 1
    tokens = list(np.random.default_rng(4).integers(0, 96, size=45))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=16, window_sinks=2)
    params = ScoringParams(lookahead=3, kernel=1, question_rows=9)
    windowed = scorer.score(tokens, replace(params, window=5)).importance
    np.testing.assert_allclose(windowed, scorer.score(tokens, params).importance, atol=1e-6, rtol=0)
    assert not np.allclose(
        windowed, scorer.score(tokens, replace(params, question_rows=0)).importance, atol=1e-4
    )


def test_question_rows_skip_a_reused_prefix():
    """A cached prefix's queries are not recomputed: only the rows this pass prefills count."""
    model, eager = tiny_pair()
    tokens = list(np.random.default_rng(5).integers(0, 96, size=40))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=8)
    params = ScoringParams(lookahead=2, kernel=3, question_rows=12)
    prefix = DraftPrefix(np.array(tokens[:33]), window=0)
    cold = scorer.score(tokens, params)
    run_to_end(scorer.iter_score(tokens, params, prefix=prefix))  # fills the prefix
    warm = run_to_end(scorer.iter_score(tokens, params, prefix=prefix))
    assert warm.reused_prefix == 33
    plain = scorer.score(tokens, replace(params, question_rows=0))
    expected = (2 * plain.importance + 6 * naive_question_importance(eager, tokens, 6, 3)) / 8
    np.testing.assert_allclose(warm.importance, expected, atol=1e-5, rtol=0)
    assert not np.allclose(cold.importance, warm.importance, atol=1e-4)


def test_the_recorder_keeps_the_last_rows_up_to_the_bound():
    assert question_recorder(20_000, 0, 15_000, 3, 0).n_rows == DRAFT_QUESTION_ROWS_MAX
    assert question_recorder(20_000, 19_990, 15_000, 3, 0).n_rows == 9  # a reused prefix's are gone
    assert question_recorder(20_000, 0, 9, 3, 0).n_rows == 9
    assert question_recorder(20_000, 0, 0, 3, 0) is None


def recorded_rows(monkeypatch) -> list[int]:
    """How many question rows each scoring pass averages in."""
    seen, with_question = [], scorer_module.with_question

    def counting(lookahead, rows):
        seen.append(len(rows))
        return with_question(lookahead, rows)

    monkeypatch.setattr(scorer_module, "with_question", counting)
    return seen


def test_a_long_question_scores_with_its_last_rows_only(monkeypatch):
    """A question that holds a document costs the draft no more than one of DRAFT_QUESTION_ROWS_MAX tokens."""
    model, eager = tiny_pair()
    tokens = list(np.random.default_rng(7).integers(0, 96, size=DRAFT_QUESTION_ROWS_MAX + 80))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=64)
    params = ScoringParams(lookahead=2, kernel=3)
    seen = recorded_rows(monkeypatch)
    long_question = scorer.score(tokens, replace(params, question_rows=len(tokens) - 10))
    bounded = scorer.score(tokens, replace(params, question_rows=DRAFT_QUESTION_ROWS_MAX))
    assert seen == [DRAFT_QUESTION_ROWS_MAX, DRAFT_QUESTION_ROWS_MAX]
    np.testing.assert_array_equal(long_question.importance, bounded.importance)
    plain = scorer.score(tokens, params)
    last_rows = naive_question_importance(eager, tokens, DRAFT_QUESTION_ROWS_MAX, 3)
    expected = (2 * plain.importance + DRAFT_QUESTION_ROWS_MAX * last_rows) / (2 + DRAFT_QUESTION_ROWS_MAX)
    np.testing.assert_allclose(long_question.importance, expected, atol=1e-5, rtol=0)


def test_a_question_within_the_bound_scores_as_without_one(monkeypatch):
    model = tiny_qwen2()
    tokens = list(np.random.default_rng(4).integers(0, 96, size=45))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=7)
    params = ScoringParams(lookahead=3, kernel=3, question_rows=9)
    bounded = scorer.score(tokens, params)
    monkeypatch.setattr(question_rows_module, "DRAFT_QUESTION_ROWS_MAX", 1 << 30)
    np.testing.assert_array_equal(scorer.score(tokens, params).importance, bounded.importance)


@pytest.mark.parametrize("window", [0, 6])
def test_a_cold_pass_split_at_the_document_end_scores_as_a_read_ahead_does(window):
    """The read-ahead fills the document's prefix chunk by chunk; a cold pass told where the document
    ends prefills it in the same chunks, so the two score bit for bit alike (not merely up to float
    rounding, which could swap a chunk at the keep threshold and change the answer)."""
    tokens = list(np.random.default_rng(6).integers(0, 96, size=41))
    scorer = DraftScorer(tiny_qwen2(), eos_ids=set(), prefill_chunk=8, window_sinks=2)
    params = ScoringParams(lookahead=3, kernel=3, window=window, question_rows=8)
    prefix = DraftPrefix(np.array(tokens[:29]), window=window)  # 29: the last chunk is partial
    while not prefix.complete:
        scorer.fill_prefix_chunk(prefix)
    read_ahead = run_to_end(scorer.iter_score(tokens, params, prefix=prefix))
    cold = run_to_end(scorer.iter_score(tokens, params, split=29))
    assert read_ahead.reused_prefix == 29 and cold.reused_prefix == 0
    np.testing.assert_array_equal(cold.importance, read_ahead.importance)
    assert cold.lookahead_tokens == read_ahead.lookahead_tokens


@pytest.mark.parametrize("first_layer", [-1, 3])  # the tiny draft has layers 0 to 2
def test_a_first_layer_the_draft_lacks_is_a_settings_error(first_layer):
    scorer = DraftScorer(tiny_qwen2(), eos_ids=set())
    with pytest.raises(SettingsError, match="not a layer of the draft"):
        scorer.score(list(range(10)), ScoringParams(lookahead=1, first_layer=first_layer))


def test_scoring_params_come_from_the_run_settings():
    settings = RunSettings(lookahead=3, kernel=5, draft_window=0, first_scored_layer=12)
    assert ScoringParams.from_settings(settings) == ScoringParams(
        lookahead=3, kernel=5, window=0, first_layer=12
    )
    assert ScoringParams.from_settings(settings, question_rows=7).question_rows == 7  # on by default
    look_ahead_only = RunSettings(score_question=False)
    assert ScoringParams.from_settings(look_ahead_only, question_rows=7).question_rows == 0


def windowed_prefill_mask(length: int, n_body: int, chunk: int, recent: int, sinks: int) -> torch.Tensor:
    """Additive 4-D mask: causal; a prompt-body query in the chunk starting at s sees keys
    [0, sinks) and [s - recent, i]; the last prompt token and look-ahead tokens see everything."""
    allowed = torch.ones(length, length, dtype=torch.bool).tril()
    for i in range(n_body):
        start = i - i % chunk
        if start > sinks + recent:
            allowed[i, sinks : start - recent] = False
    return torch.zeros(length, length).masked_fill(~allowed, float("-inf"))[None, None]


@pytest.mark.parametrize("prefill_chunk,window", [(7, 5), (4, 9), (16, 3)])
def test_windowed_prefill_matches_naive_masked_attention(prefill_chunk, window):
    model, eager = tiny_pair()
    tokens = list(np.random.default_rng(2).integers(0, 96, size=45))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=prefill_chunk, window_sinks=2)
    result = scorer.score(tokens, ScoringParams(lookahead=4, kernel=3, window=window))
    full = scorer.score(tokens, ScoringParams(lookahead=4, kernel=3))
    mask = windowed_prefill_mask(len(tokens) + 3, len(tokens) - 1, prefill_chunk, window, sinks=2)
    expected = naive_importance(eager, tokens, result.lookahead_tokens[:3], 4, kernel=3, mask=mask)
    np.testing.assert_allclose(result.importance, expected, atol=1e-5, rtol=0)
    assert not np.allclose(result.importance, full.importance, atol=1e-4)  # the window did cut keys


def test_window_wider_than_the_prompt_changes_nothing():
    model = tiny_qwen2()
    tokens = list(np.random.default_rng(3).integers(0, 96, size=40))
    scorer = DraftScorer(model, eos_ids=set(), prefill_chunk=8, window_sinks=2)
    np.testing.assert_array_equal(
        scorer.score(tokens, ScoringParams(lookahead=2, window=64)).importance,
        scorer.score(tokens, ScoringParams(lookahead=2)).importance,
    )


def test_lookahead_tokens_are_greedy():
    model = tiny_qwen2()
    tokens = [3, 14, 15, 92, 65, 35, 89, 79]
    result = DraftScorer(model, eos_ids=set()).score(tokens, ScoringParams(lookahead=3, kernel=1))
    seq = list(tokens)
    with torch.no_grad():
        for _ in range(3):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    assert result.lookahead_tokens == seq[len(tokens) :]


def test_lookahead_stops_at_eos():
    model = tiny_qwen2()
    tokens = [5, 6, 7, 8, 9, 10]
    params = ScoringParams(lookahead=4, kernel=1)
    first = DraftScorer(model, eos_ids=set()).score(tokens, params).lookahead_tokens[0]
    stopped = DraftScorer(model, eos_ids={first}).score(tokens, params)
    assert stopped.steps == 1 and stopped.lookahead_tokens == []


def test_cancel_stops_prefill():
    model = tiny_qwen2()
    cancel = CancelToken()
    calls = []

    def progress(done, total):
        calls.append(done)
        cancel.cancel()

    with pytest.raises(Cancelled):
        steps = DraftScorer(model, eos_ids=set(), prefill_chunk=8).iter_score(list(range(40)), cancel=cancel)
        for done, _total in steps:
            progress(done, _total)
    assert calls == [8]  # stopped at the next layer after the first chunk


def test_a_token_past_the_drafts_vocabulary_is_refused_by_id():
    """A compatible draft may be shorter than the target; an id past its end is named, not an IndexError."""
    model = tiny_qwen2()
    rows = model.get_input_embeddings().num_embeddings
    scorer = DraftScorer(model, eos_ids=set())
    with pytest.raises(ValueError, match=f"token id {rows}, past the draft's vocabulary"):
        scorer.score([1, 2, 3, rows], ScoringParams(lookahead=1, kernel=3))


def test_look_ahead_attention_groups_query_heads_over_their_kv_head_without_copying_keys():
    """Query head h reads KV head h // (heads per KV head), as grouped-query attention does."""
    from engine.draft.scorer import prompt_attention_probs

    generator = torch.Generator().manual_seed(0)
    query = torch.randn(1, 14, 1, 64, generator=generator)
    key = torch.randn(1, 2, 300, 64, generator=generator)
    keys = key[0].repeat_interleave(7, dim=0)  # (14, 300, 64): each KV head copied per query head
    reference = torch.softmax(torch.einsum("hd,hkd->hk", query[0, :, 0], keys) * 0.125, dim=-1)[:, :250]
    probs = prompt_attention_probs(query, key, 0.125, 250)
    assert probs.shape == (14, 250)
    torch.testing.assert_close(probs, reference, rtol=1e-5, atol=1e-7)
