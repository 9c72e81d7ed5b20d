"""Settings for loading models and for one run. Plain dataclasses, shared by CLI and GUI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PositionMode = Literal["auto", "restore", "renumber"]
RunMode = Literal["baseline", "spec", "both"]
Device = Literal["auto", "cuda", "cpu"]
DraftQuant = Literal["none", "int8"]


@dataclass
class ModelSettings:
    """How to load the target and the draft. None paths mean the default models."""

    target_path: Path | None = None
    draft_path: Path | None = None  # a GGUF file or a transformers model directory
    device: Device = "auto"
    draft_quant: DraftQuant = "int8"  # dynamic int8 Linear layers on CPU (fbgemm), ~2x faster; "none": fp32
    n_threads: int | None = None  # None: physical cores
    n_ctx: int = 32768
    n_batch: int = 512


DEFAULT_MIN_TOKENS = 4096  # below about 4K tokens the draft costs more than it saves
DRAFT_PREFILL_CHUNK = 1024  # tokens per draft prefill step: bounds memory, lets Cancel in between
DRAFT_WINDOW_SINKS = 64  # first prompt tokens every query sees when the draft's prefill is windowed
DEFAULT_DRAFT_WINDOW = 4096  # draft prefill attention window (0: full attention); see the perf note


@dataclass
class RunSettings:
    """One request: how much to keep and how to place the kept tokens."""

    keep: float = 0.2
    positions: PositionMode = "auto"
    min_tokens: int | None = None  # None: the calibrated prediction decides, else DEFAULT_MIN_TOKENS
    force: bool = False
    max_new_tokens: int = 256
    chunk_size: int = 32
    kernel: int = 13
    lookahead: int = 8
    draft_window: int = DEFAULT_DRAFT_WINDOW  # draft prefill attends to this many recent tokens; 0 = all
    truncate: bool = False  # cut the document's end to fit the context instead of refusing
    system_prompt: str = "You are a helpful assistant. Answer using only the document."
