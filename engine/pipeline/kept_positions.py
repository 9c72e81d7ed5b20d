"""Where the kept tokens go in the target: the positions its prefill gets, and where the answer starts.

restore: each token at its original position (the paper's placement; needs gapped positions).
renumber: 0..k-1, as if the kept tokens were the whole prompt.
compress: the gaps the dropped chunks leave, shrunk by one factor so that the last position and
    the answer's room stay inside the window; a prompt that fits needs no shrinking, so there it
    is restore. For prompts longer than the window, where restore would reach past the positions
    the target was trained on.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Placement = Literal["restore", "renumber", "compress"]
GAPPED: tuple[str, ...] = ("restore", "compress")  # placements that need a runtime accepting gapped positions


def place_kept(kept_idx: np.ndarray, n_prompt: int, placement: str, limit: int) -> tuple[np.ndarray, int]:
    """(positions of the kept tokens, position of the first generated token).

    `limit`: positions the prompt may use, the answer's room excluded (compress keeps below it)."""
    kept_idx = np.asarray(kept_idx, dtype=np.int64)
    if placement == "restore":
        return kept_idx.astype(np.int32), n_prompt
    if placement == "renumber":
        return np.arange(len(kept_idx), dtype=np.int32), len(kept_idx)
    if placement == "compress":
        positions = compressed_positions(kept_idx, limit)
        return positions, int(positions[-1]) + 1 if len(
            positions
        ) else 0  # the tail is always kept: it ends the prompt
    raise ValueError(f"unknown placement {placement!r}")


def compressed_positions(kept_idx: np.ndarray, limit: int) -> np.ndarray:
    """Original positions with every gap (before the first kept token, and between kept tokens)
    scaled by one factor, rounded down, so that all of them stay below `limit`."""
    if len(kept_idx) == 0:
        return np.zeros(0, dtype=np.int32)
    gaps = np.diff(kept_idx, prepend=-1) - 1  # dropped tokens before each kept one
    slack = max(limit - len(kept_idx), 0)
    total = int(gaps.sum())
    if total > slack:
        gaps = np.floor(gaps * (slack / total)).astype(np.int64)
    return (np.cumsum(gaps + 1) - 1).astype(np.int32)
