"""The question's rows: during the draft's prefill, the attention of the prompt's last tokens before the
final one (the question, its end of turn, the assistant header) over the whole prompt, as SnapKV's
observation window scores a prompt with its last tokens' queries.

At most DRAFT_QUESTION_ROWS_MAX rows are recorded, the last ones: a question that holds a pasted
document costs the draft what a short one does, not the square of its length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.core.settings import DRAFT_QUESTION_ROWS_MAX
from engine.draft.selection import smooth_rows


def causal_attention_probs(
    query: torch.Tensor, key: torch.Tensor, scaling: float, positions: torch.Tensor
) -> torch.Tensor:
    """softmax(q k^T * scaling) of several query tokens at `positions`, each over the keys up to its own.

    query: (1, H, Q, d); key: (1, KVH, kv_len, d). Returns (H, Q, kv_len)."""
    n_heads, n_kv_heads = query.shape[1], key.shape[1]
    keys = key[0].repeat_interleave(n_heads // n_kv_heads, dim=0)  # (H, kv_len, d)
    logits = torch.einsum("hqd,hkd->hqk", query[0].float(), keys.float()) * scaling
    later = torch.arange(key.shape[2], device=key.device)[None, :] > positions[:, None]
    return torch.softmax(logits.masked_fill(later, float("-inf")), dim=-1)


@dataclass
class QuestionRows:
    """During the prefill: the attention of the queries at positions [first_row, n_prompt - 1) over the
    prompt's keys, per layer, each row smoothed and reduced by its max over heads."""

    first_row: int
    n_prompt: int
    kernel: int
    first_layer: int = 0
    rows: dict[int, list[torch.Tensor]] = field(default_factory=dict)  # layer -> (rows, n_prompt) pieces

    @property
    def n_rows(self) -> int:
        return self.n_prompt - 1 - self.first_row

    def record(self, layer: int, query: torch.Tensor, key: torch.Tensor, scaling: float) -> None:
        """query: (1, H, q_len, d), the chunk's last queries; key: (1, KVH, kv_len, d), every key so far."""
        if layer < self.first_layer:
            return
        kv_len, q_len = key.shape[2], query.shape[2]
        positions = torch.arange(kv_len - q_len, kv_len, device=query.device)
        picked = positions >= self.first_row
        if not bool(picked.any()):
            return
        probs = causal_attention_probs(query[:, :, picked], key, scaling, positions[picked])
        padded = torch.nn.functional.pad(probs, (0, self.n_prompt - kv_len))[..., : self.n_prompt]
        self.rows.setdefault(layer, []).append(smooth_rows(padded, self.kernel).amax(dim=0).cpu())

    def importance(self) -> torch.Tensor:
        """Each question row's max over the recorded layers: (rows, n_prompt)."""
        if not self.rows:
            return torch.zeros(0, self.n_prompt, dtype=torch.float64)
        per_layer = torch.stack([torch.cat(self.rows[layer], dim=0) for layer in sorted(self.rows)])
        return per_layer.amax(dim=0).double()


def question_recorder(
    n_prompt: int, reused: int, wanted: int, kernel: int, first_layer: int
) -> QuestionRows | None:
    """The recorder of the `wanted` rows before the prompt's last token, at most DRAFT_QUESTION_ROWS_MAX
    (the last ones), over the tokens this pass prefills (a reused prefix's queries are gone); None when
    there are none to record."""
    first_row = max(n_prompt - 1 - min(wanted, DRAFT_QUESTION_ROWS_MAX), reused)
    if wanted < 1 or first_row >= n_prompt - 1:
        return None
    return QuestionRows(first_row, n_prompt, kernel, first_layer)
