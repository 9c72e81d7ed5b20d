"""What the window predicts for the open document: the cost model's figures and the window's fit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Prediction:
    """What the calibration predicts for a prompt, and whether SpecPrefill would run on it."""

    estimate: dict | None  # Engine.estimate's figures; None when this machine is not calibrated
    bypass_reason: str  # "" when SpecPrefill runs
    # Engine.window_fit's WindowFit: whether the prompt fits the target's window, and what keeps it
    # there; arithmetic only, so it is there with or without a calibration
    fit: Any
    keep: float  # the keep the user asked for (the fit may lower SpecPrefill's: fit.spec_keep)
