"""Where GGUF models usually sit on a machine: this app's cache, LM Studio, Ollama, the Hugging Face
hub cache, and the folders the user names. Only paths here; nothing is read or created."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.core.paths import models_dir

MODEL_DIRS_ENV = "SPECPREFILL_MODEL_DIRS"  # extra folders, separated like PATH


@dataclass(frozen=True)
class Source:
    kind: str  # "specprefill" | "lmstudio" | "ollama" | "huggingface" | "folder"
    root: Path


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def lmstudio_roots() -> list[Path]:
    # LM Studio 0.3 moved its models from ~/.lmstudio/models to ~/.cache/lm-studio/models on some installs.
    return [_home() / ".lmstudio" / "models", _home() / ".cache" / "lm-studio" / "models"]


def ollama_root() -> Path:
    configured = os.environ.get("OLLAMA_MODELS")
    return Path(configured).expanduser() if configured else _home() / ".ollama" / "models"


def huggingface_root() -> Path:
    """As huggingface_hub decides: HF_HUB_CACHE, else HF_HOME/hub, else the XDG cache's huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or str(_home() / ".cache")
    return Path(cache).expanduser() / "huggingface" / "hub"


def user_dirs(extra: tuple[str | os.PathLike[str], ...] = ()) -> list[Path]:
    """The folders given with --discover-dir, then those in SPECPREFILL_MODEL_DIRS."""
    listed = [p for p in os.environ.get(MODEL_DIRS_ENV, "").split(os.pathsep) if p.strip()]
    return [Path(p).expanduser() for p in (*extra, *listed)]


def model_sources(extra: tuple[str | os.PathLike[str], ...] = ()) -> list[Source]:
    """Every place looked in, in the order models are listed (a file found twice keeps its first place)."""
    sources = [Source("specprefill", models_dir())]
    sources += [Source("lmstudio", root) for root in lmstudio_roots()]
    sources += [Source("ollama", ollama_root()), Source("huggingface", huggingface_root())]
    sources += [Source("folder", root) for root in user_dirs(extra)]
    return sources
