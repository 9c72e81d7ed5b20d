"""From token importance to the kept tokens: smoothing, chunk scores, top-k chunks, protections.

Pure functions over numpy/torch arrays so they can be checked by hand and fuzzed.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from engine.draft.question_words import ranked_with_words


def smooth_rows(rows: torch.Tensor, kernel: int) -> torch.Tensor:
    """1-D average pool along the last axis, stride 1, same length.

    Edges average over the window that exists (no zero padding), so the first and
    last tokens are not penalized for sitting at the border.
    """
    if kernel <= 1:
        return rows
    flat = rows.reshape(-1, 1, rows.shape[-1])
    pooled = F.avg_pool1d(flat, kernel_size=kernel, stride=1, padding=kernel // 2, count_include_pad=False)
    return pooled[..., : rows.shape[-1]].reshape(rows.shape)


def step_importance(attn_rows: torch.Tensor, kernel: int) -> torch.Tensor:
    """One look-ahead step: rows are (layers*heads, n_prompt) attention; smooth, then max over rows."""
    return smooth_rows(attn_rows, kernel).amax(dim=0)


def chunk_scores(importance: np.ndarray, chunk_size: int, reduce=np.nanmean) -> np.ndarray:
    """Mean importance per chunk (or another NaN-skipping `reduce`, such as np.nanmax) along the last
    axis, so rows of scores are chunked alike; the last chunk may be shorter."""
    importance = np.asarray(importance)
    *rows, n = importance.shape
    n_chunks = math.ceil(n / chunk_size)
    padded = np.full((*rows, n_chunks * chunk_size), np.nan, dtype=np.float64)
    padded[..., :n] = importance
    return reduce(padded.reshape(*rows, n_chunks, chunk_size), axis=-1)


def protected_chunks(n_tokens: int, chunk_size: int, tail_start: int) -> list[int]:
    """The first chunk and every chunk that overlaps the tail [tail_start, n_tokens)."""
    n_chunks = math.ceil(n_tokens / chunk_size)
    tail_start = min(max(tail_start, 0), n_tokens - 1)
    tail = range(tail_start // chunk_size, n_chunks)
    return sorted({0, *tail})


def scored_chunks(importance: np.ndarray, chunk_size: int, tail_start: int) -> tuple[np.ndarray, list[int]]:
    """One prompt's chunk scores (chunk_scores) and protected chunks (protected_chunks), computed once
    for whatever reads them (the keep=auto choice, then plan_selection)."""
    return chunk_scores(importance, chunk_size), protected_chunks(len(importance), chunk_size, tail_start)


def select_chunks(
    scores: np.ndarray,
    keep: float,
    protected: list[int],
    max_chunks: int | None = None,
    parts: list[tuple[int, int]] = (),
    focus: list[tuple[int, int]] = (),
    definitions: list[tuple[int, int]] = (),
) -> list[int]:
    """ceil(keep * n_chunks) chunks, at most `max_chunks` (what fits the target's window), never
    fewer than the protected ones; in document order. With `definitions` and `focus` (chunk ranges
    [a, b) of the definitions and files a question names), their best-scored chunks come first, the
    definitions' before the files', up to half of the budget (focus_picks). With `parts` (chunk
    ranges: pages, files), each part then gets its best-scored chunks up to half the keep of its own
    size (coverage_picks); the top-scored chunks fill the rest."""
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    n_chunks = len(scores)
    wanted = math.ceil(keep * n_chunks) if max_chunks is None else min(math.ceil(keep * n_chunks), max_chunks)
    budget = min(n_chunks, max(wanted, len(protected)))
    chosen = set(protected)
    add_until(chosen, focus_picks(scores, [definitions, focus], (budget - len(chosen)) // 2), budget)
    add_until(chosen, coverage_picks(scores, parts, keep / 2), budget)
    # Stable sort on -score: ties go to the earlier chunk, so selection is deterministic.
    add_until(chosen, np.argsort(-scores, kind="stable"), budget)
    return sorted(chosen)


def add_until(chosen: set[int], picks, budget: int) -> None:
    """Add picks in their order until `chosen` holds `budget` chunks."""
    for idx in picks:
        if len(chosen) >= budget:
            break
        chosen.add(int(idx))


def focus_picks(scores: np.ndarray, tiers: list[list[tuple[int, int]]], limit: int) -> list[int]:
    """Each tier's chunk ranges (named definitions, then named files) in turn: their best chunks,
    round-robin across the ranges, `limit` distinct chunks at most."""
    picks = dict.fromkeys(i for ranges in tiers for i in coverage_picks(scores, ranges, 1.0))
    return list(picks)[: max(limit, 0)]


def coverage_picks(scores: np.ndarray, parts: list[tuple[int, int]], share: float) -> list[int]:
    """Each part's best chunks, ceil(share * its chunks) of them (at least one), taken round-robin
    (every part's best, then every part's second best, ...) so that a budget too small for all of
    them still reaches every part it can."""
    ranked = [sorted(range(a, b), key=lambda i: (-scores[i], i)) for a, b in parts if b > a]
    quotas = [max(1, math.ceil(share * len(r))) for r in ranked]
    picks: list[int] = []
    for rank in range(max(quotas, default=0)):
        picks += [int(r[rank]) for r, quota in zip(ranked, quotas) if rank < quota]
    return picks


def chunk_parts(token_parts: list[tuple[int, int]], chunk_size: int) -> list[tuple[int, int]]:
    """Token ranges as the chunk ranges that hold them (a chunk across a border counts for both)."""
    return [(a // chunk_size, math.ceil(b / chunk_size)) for a, b in token_parts if b > a]


def kept_token_indices(kept: list[int], chunk_size: int, n_tokens: int) -> np.ndarray:
    """Token indices of the kept chunks, ascending."""
    parts = [np.arange(c * chunk_size, min((c + 1) * chunk_size, n_tokens)) for c in kept]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def plan_selection(
    importance: np.ndarray,
    chunk_size: int,
    keep: float,
    tail_start: int,
    max_tokens: int | None = None,
    parts: list[tuple[int, int]] = (),
    focus: list[tuple[int, int]] = (),
    definitions: list[tuple[int, int]] = (),
    word_scores: np.ndarray | None = None,
    word_weight: float = 0.0,
    chunked: tuple[np.ndarray, list[int]] | None = None,
):
    """Chunk scores, protected chunks, kept chunks and kept token indices for one prompt; with
    `max_tokens`, the kept chunks hold at most that many tokens (a chunk holds chunk_size at most);
    with `definitions` and `focus` (token ranges of named definitions and files), their best chunks
    come first; with `parts` (token ranges of pages, sections or files), each part is covered (select_chunks).
    With `word_scores` (each chunk's match with the question's words) and a positive `word_weight`, the
    scores returned and selected by are the draft's and the words' ranks together (ranked_with_words).
    `chunked`: scored_chunks(importance, chunk_size, tail_start) when the caller has it already."""
    scores, protected = chunked if chunked is not None else scored_chunks(importance, chunk_size, tail_start)
    if word_scores is not None:
        scores = ranked_with_words(scores, word_scores, word_weight)
    max_chunks = None if max_tokens is None else max_tokens // chunk_size
    kept = select_chunks(
        scores,
        keep,
        protected,
        max_chunks,
        chunk_parts(parts, chunk_size),
        chunk_parts(focus, chunk_size),
        chunk_parts(definitions, chunk_size),
    )
    return scores, protected, kept, kept_token_indices(kept, chunk_size, len(importance))
