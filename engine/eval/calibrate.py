"""Calibration: time this machine's target prefill and draft scoring, then fit the cost model.

The draft is timed with full attention, so the n^2 term is measured; estimates for a
windowed prefill scale it by the attention area (engine.pipeline.costmodel).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

from engine.core.cancel import NEVER, CancelToken
from engine.core.settings import RunSettings
from engine.pipeline import Engine
from engine.pipeline.costmodel import CostModel, fit_quadratic


class Measurement(NamedTuple):
    """One timing; unpacks as (role, tokens, seconds)."""

    role: str  # "target" | "draft"
    tokens: int
    seconds: float


def calibrate(engine: Engine, text: str, lengths: list[int], lookahead: int = RunSettings.lookahead,
              kernel: int = RunSettings.kernel, cancel: CancelToken = NEVER) -> Iterator[Measurement | CostModel]:
    """Yields a Measurement per timing, then the fitted CostModel."""
    tokens = engine.sample_tokens(text, max(lengths), "calibration")
    draft_settings = RunSettings(lookahead=lookahead, kernel=kernel, draft_window=0)
    measured: dict[str, dict[int, float]] = {"target": {}, "draft": {}}
    for n in lengths:
        measured["target"][n] = engine.time_prefill(tokens[:n], cancel)
        yield Measurement("target", n, measured["target"][n])
        measured["draft"][n] = engine.time_draft(tokens[:n], draft_settings, cancel)
        yield Measurement("draft", n, measured["draft"][n])
    fits = {role: fit_quadratic(list(m), list(m.values())) for role, m in measured.items()}
    info = engine.info
    yield CostModel(target_prefill=fits["target"], draft=fits["draft"],
                    measurements={role: {str(n): s for n, s in m.items()} for role, m in measured.items()},
                    machine={"target": str(info.target_path), "draft": str(info.draft_path),
                             "device": info.device, "date": time.strftime("%Y-%m-%d %H:%M:%S")})
