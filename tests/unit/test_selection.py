import math

import numpy as np
import pytest
import torch

from engine.draft.selection import (
    chunk_scores,
    kept_token_indices,
    plan_selection,
    protected_chunks,
    select_chunks,
    smooth_rows,
    step_importance,
)


def test_smooth_rows_hand_computed():
    row = torch.tensor([[0.0, 3.0, 0.0, 0.0, 6.0]])
    # kernel 3, edges average only the window that exists:
    # [ (0+3)/2, (0+3+0)/3, (3+0+0)/3, (0+0+6)/3, (0+6)/2 ]
    expected = torch.tensor([[1.5, 1.0, 1.0, 2.0, 3.0]])
    torch.testing.assert_close(smooth_rows(row, 3), expected)


def test_smooth_rows_keeps_length_and_kernel_one_is_identity():
    rows = torch.rand(4, 37)
    assert smooth_rows(rows, 13).shape == rows.shape
    torch.testing.assert_close(smooth_rows(rows, 1), rows)


def test_step_importance_takes_max_over_rows_after_smoothing():
    rows = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 4.0]])
    # kernel 3: row0 -> [0.5, 1/3, 0, 0]; row1 -> [0, 0, 4/3, 2]
    torch.testing.assert_close(step_importance(rows, 3), torch.tensor([0.5, 1 / 3, 4 / 3, 2.0]))


def test_chunk_scores_mean_with_short_last_chunk():
    importance = np.array([1, 3, 2, 2, 10, 0, 7], dtype=float)
    np.testing.assert_allclose(chunk_scores(importance, 3), [2.0, 4.0, 7.0])


def test_chunk_scores_of_rows_are_each_rows_chunk_scores():
    rows = np.random.default_rng(4).random((3, 2, 70))
    means, maxima = chunk_scores(rows, 32), chunk_scores(rows, 32, np.nanmax)
    assert means.shape == maxima.shape == (3, 2, 3)
    for i, j in np.ndindex(3, 2):
        np.testing.assert_allclose(means[i, j], chunk_scores(rows[i, j], 32))
        np.testing.assert_allclose(maxima[i, j], [rows[i, j, a : a + 32].max() for a in (0, 32, 64)])


def test_protected_chunks_head_and_tail():
    # 100 tokens, chunks of 32 -> 4 chunks; the question starts at token 70 -> chunks 2 and 3
    assert protected_chunks(100, 32, 70) == [0, 2, 3]
    assert protected_chunks(100, 32, 99) == [0, 3]


def test_select_chunks_budget_order_and_protection():
    scores = np.array([0.0, 9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 0.5, 0.1, 0.2])
    # keep 0.4 of 10 chunks -> 4; protected 0 and 9 take two, the best others are 1 and 3
    assert select_chunks(scores, 0.4, [0, 9]) == [0, 1, 3, 9]
    # a budget smaller than the protected set still keeps all protected chunks
    assert select_chunks(scores, 0.1, [0, 8, 9]) == [0, 8, 9]
    assert select_chunks(scores, 1.0, [0]) == list(range(10))


def test_select_chunks_rejects_bad_keep():
    with pytest.raises(ValueError):
        select_chunks(np.ones(3), 0.0, [0])


def test_kept_token_indices_and_plan():
    assert kept_token_indices([0, 2], 4, 10).tolist() == [0, 1, 2, 3, 8, 9]
    importance = np.zeros(100)
    importance[40:48] = 1.0  # one hot spot in chunk 1 (tokens 32..63) with chunk size 32
    scores, protected, kept, idx = plan_selection(importance, 32, 0.75, tail_start=96)
    assert protected == [0, 3]
    assert kept == [0, 1, 3]  # ceil(0.75 * 4) = 3: both protected chunks plus the hot spot
    assert len(idx) == 32 + 32 + 4
    _, _, kept_half, _ = plan_selection(importance, 32, 0.5, tail_start=96)
    assert kept_half == [0, 3]  # ceil(0.5 * 4) = 2: the protected chunks fill the budget
    assert math.isclose(scores[1], 8 / 32)
