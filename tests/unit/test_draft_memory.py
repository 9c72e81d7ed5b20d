"""The draft's memory for scoring a prompt: a question of any length adds a bounded part."""

from __future__ import annotations

from types import SimpleNamespace

from engine.core.settings import DRAFT_QUESTION_ROWS_MAX
from engine.draft.memory import draft_scoring_need

# The default draft's shape (Qwen2.5-0.5B): 24 layers, 14 heads, 2 KV heads of 64 dims.
DEFAULT_DRAFT = SimpleNamespace(
    num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, head_dim=64, hidden_size=896
)


def parts(n_prompt: int, question_rows: int) -> dict[str, int]:
    return dict(draft_scoring_need(DEFAULT_DRAFT, 4, n_prompt, question_rows).parts)


def test_a_question_as_long_as_the_prompt_needs_the_bounded_rows_only():
    """A 13K-token document pasted as the question once needed 26 GB for its rows' attention."""
    need = parts(12_988, 12_900)
    assert need["question attention"] == 3 * DRAFT_QUESTION_ROWS_MAX * 14 * 12_988 * 4
    assert need["question attention"] < 300e6 and sum(need.values()) < 1e9


def test_a_short_question_needs_its_own_rows():
    assert parts(8_000, 30)["question attention"] == 3 * 30 * 14 * 8_000 * 4
    assert "question attention" not in parts(8_000, 0)
