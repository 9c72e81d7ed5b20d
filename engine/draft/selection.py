"""From token importance to the kept tokens: smoothing, chunk scores, top-k chunks, protections.

Pure functions over numpy/torch arrays so they can be checked by hand and fuzzed.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


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


def chunk_scores(importance: np.ndarray, chunk_size: int) -> np.ndarray:
    """Mean importance per chunk; the last chunk may be shorter."""
    n = len(importance)
    n_chunks = math.ceil(n / chunk_size)
    padded = np.full(n_chunks * chunk_size, np.nan, dtype=np.float64)
    padded[:n] = importance
    return np.nanmean(padded.reshape(n_chunks, chunk_size), axis=1)


def protected_chunks(n_tokens: int, chunk_size: int, tail_start: int) -> list[int]:
    """The first chunk and every chunk that overlaps the tail [tail_start, n_tokens)."""
    n_chunks = math.ceil(n_tokens / chunk_size)
    tail_start = min(max(tail_start, 0), n_tokens - 1)
    tail = range(tail_start // chunk_size, n_chunks)
    return sorted({0, *tail})


def select_chunks(scores: np.ndarray, keep: float, protected: list[int], max_chunks: int | None = None) -> list[int]:
    """ceil(keep * n_chunks) chunks, at most `max_chunks` (what fits the target's window), never
    fewer than the protected ones; in document order."""
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    n_chunks = len(scores)
    wanted = math.ceil(keep * n_chunks) if max_chunks is None else min(math.ceil(keep * n_chunks), max_chunks)
    budget = min(n_chunks, max(wanted, len(protected)))
    chosen = set(protected)
    # Stable sort on -score: ties go to the earlier chunk, so selection is deterministic.
    for idx in np.argsort(-scores, kind="stable"):
        if len(chosen) >= budget:
            break
        chosen.add(int(idx))
    return sorted(chosen)


def kept_token_indices(kept: list[int], chunk_size: int, n_tokens: int) -> np.ndarray:
    """Token indices of the kept chunks, ascending."""
    parts = [np.arange(c * chunk_size, min((c + 1) * chunk_size, n_tokens)) for c in kept]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def plan_selection(importance: np.ndarray, chunk_size: int, keep: float, tail_start: int,
                   max_tokens: int | None = None):
    """Chunk scores, protected chunks, kept chunks and kept token indices for one prompt; with
    `max_tokens`, the kept chunks hold at most that many tokens (a chunk holds chunk_size at most)."""
    scores = chunk_scores(importance, chunk_size)
    protected = protected_chunks(len(importance), chunk_size, tail_start)
    max_chunks = None if max_tokens is None else max_tokens // chunk_size
    kept = select_chunks(scores, keep, protected, max_chunks)
    return scores, protected, kept, kept_token_indices(kept, chunk_size, len(importance))
