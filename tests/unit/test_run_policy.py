"""RunPolicy: bypass, window fit, positions and the selection budget, from lengths and settings alone."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from engine.core.errors import ContextOverflowError, PositionsUnsupportedError
from engine.core.settings import DEFAULT_MIN_TOKENS, RunSettings
from engine.pipeline.costmodel import CostModel, Quadratic
from engine.pipeline.run_policy import LONG_PROMPT_PLACEMENT, RunPolicy


def policy(n_ctx=512, positions_supported=True, trained_window=300, cost_model=None) -> RunPolicy:
    info = SimpleNamespace(n_ctx=n_ctx, positions_supported=positions_supported)
    return RunPolicy(info, SimpleNamespace(trained_window=trained_window), cost_model)


def prompt(n_tokens: int, tail_start: int) -> SimpleNamespace:
    return SimpleNamespace(
        n_tokens=n_tokens, tail_start=tail_start, tokens=np.zeros(n_tokens, dtype=np.int32)
    )


def test_positions_auto_restore_renumber_and_compress():
    assert policy().resolve_positions("auto") == "restore"
    assert policy().resolve_positions("auto", fits=False) == LONG_PROMPT_PLACEMENT
    assert policy(positions_supported=False).resolve_positions("auto") == "renumber"
    assert policy().resolve_positions("restore", fits=False) == "compress"
    assert policy().resolve_positions("renumber", fits=False) == "renumber"
    with pytest.raises(PositionsUnsupportedError):
        policy(positions_supported=False).resolve_positions("restore")


def test_bypass_below_the_fixed_threshold_unless_forced_or_too_long():
    settings = RunSettings(max_new_tokens=16)
    assert "threshold" in policy(n_ctx=1 << 20).bypass_reason(DEFAULT_MIN_TOKENS - 1, settings)
    assert policy(n_ctx=1 << 20).bypass_reason(DEFAULT_MIN_TOKENS, settings) == ""
    assert policy().bypass_reason(10, RunSettings(max_new_tokens=16, force=True)) == ""
    assert policy().bypass_reason(500, settings) == ""  # 500 + 16 > 512: only the selection fits it


def test_the_calibration_decides_when_no_threshold_is_set():
    slow_draft = CostModel(target_prefill=Quadratic(0, 0.01, 0), draft=Quadratic(0, 1.0, 0))
    decided = policy(cost_model=slow_draft)
    assert "predicted" in decided.bypass_reason(300, RunSettings(max_new_tokens=16))
    assert decided.bypass_reason(300, RunSettings(max_new_tokens=16, min_tokens=100)) == ""
    assert decided.estimate(300, RunSettings(max_new_tokens=16))["tokens"] == 300
    assert policy().estimate(300, RunSettings()) is None


def test_the_draft_pass_follows_the_scorers_trained_window():
    scorer = SimpleNamespace(trained_window=300)
    live = RunPolicy(SimpleNamespace(n_ctx=512, positions_supported=True), scorer)
    assert live.draft_pass_tokens(RunSettings(lookahead=8)) == 292
    scorer.trained_window = 100  # read at each call, not at construction
    assert live.draft_pass_tokens(RunSettings(lookahead=8)) == 92


def test_the_selection_budget_is_none_when_the_prompt_fits_and_refuses_a_question_too_long():
    settings = RunSettings(chunk_size=8, max_new_tokens=16)
    assert policy().selection_budget(prompt(400, 390), settings) is None
    assert policy().selection_budget(prompt(1000, 990), settings) == 512 - 16
    with pytest.raises(ContextOverflowError, match="shorten the question"):
        policy().selection_budget(prompt(1000, 400), settings)  # a 600-token question cannot fit
