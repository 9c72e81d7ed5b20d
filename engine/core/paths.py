"""Where the app keeps its cache (models, wheels, dequantized drafts, saved prefix states) and config."""

from __future__ import annotations

from pathlib import Path

import platformdirs

APP = "specprefill"


def cache_dir() -> Path:
    # platformdirs honours $XDG_CACHE_HOME on Linux, as the setup scripts do.
    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def models_dir() -> Path:
    return cache_dir() / "models"


def draft_cache_dir() -> Path:
    return cache_dir() / "draft"


def state_cache_dir() -> Path:
    """Saved KV states of documents' prefixes (engine.pipeline.state_store)."""
    return cache_dir() / "states"


def shapes_dir() -> Path:
    """Random-weight GGUFs with a real model's shape, for `bench --target-shape` (engine.models.shapes)."""
    return cache_dir() / "shapes"


def calibration_path() -> Path:
    return cache_dir() / "calibration.json"
