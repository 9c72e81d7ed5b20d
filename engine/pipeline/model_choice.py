"""Choosing a target among the models found on disk, and the draft to pair it with.

The draft is the smallest other model found whose vocabulary is identical or compatible with
the target's (SpecPrefill then selects by token ids, exact and cheap); failing that, the
bundled draft, by token ids when its vocabulary fits and by character spans when it does not.
The plan also says what the pair needs in memory against what is free, and, once this machine
is calibrated, the TTFTs it predicts, scaled from the calibrated pair by parameter count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

from engine.core.memory import KvShape
from engine.core.settings import MAX_CONTEXT_DEFAULT
from engine.models import defaults
from engine.models.discover import DiscoveredModel
from engine.models.gguf_header import read_header
from engine.pipeline import costmodel

# The default draft (630M parameters with its separate output matrix) takes about 1.2 GB with its
# Linear layers in int8 and its embeddings in fp32, the default --draft-quant.
DRAFT_BYTES_PER_PARAMETER = 2
PREDICTION_TOKENS = 8192
PREDICTION_KEEP = 0.2


@dataclass(frozen=True)
class DraftChoice:
    path: Path | None  # None: the bundled default draft
    name: str
    verdict: str  # the vocabulary check's: identical, compatible or different
    selection: str  # "tokens" or "spans"
    reason: str


@dataclass(frozen=True)
class PairPlan:
    target: DiscoveredModel
    draft: DraftChoice
    needed_bytes: int
    free_bytes: int
    prediction: dict | None  # CostModel.estimate's fields at PREDICTION_TOKENS, scaled

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.free_bytes


def usable(models: list[DiscoveredModel]) -> list[DiscoveredModel]:
    """The models whose header could be read."""
    return [m for m in models if m.facts is not None and m.error is None]


def choose_draft(target: DiscoveredModel, models: list[DiscoveredModel]) -> DraftChoice:
    smaller = sorted(
        (
            m
            for m in usable(models)
            if m.resolved_path != target.resolved_path and m.facts.parameters * 2 <= target.facts.parameters
        ),
        key=lambda m: m.facts.parameters,
    )
    for candidate in smaller:
        verdict = _verdict(target.resolved_path, candidate.resolved_path)
        if verdict in ("identical", "compatible"):
            return DraftChoice(
                candidate.resolved_path,
                candidate.name,
                verdict,
                "tokens",
                f"{candidate.name} is the smallest model found with the target's vocabulary ({verdict})",
            )
    verdict = _verdict(target.resolved_path, defaults.DRAFT.path)
    selection = "spans" if verdict == "different" else "tokens"
    why = (
        "no smaller model with the target's vocabulary was found: the bundled draft selects by "
        "character spans"
        if selection == "spans"
        else f"the bundled draft shares its vocabulary ({verdict})"
    )
    return DraftChoice(None, defaults.DRAFT.name, verdict, selection, why)


def plan_pair(
    target: DiscoveredModel, models: list[DiscoveredModel], n_ctx: int = MAX_CONTEXT_DEFAULT
) -> PairPlan:
    draft = choose_draft(target, models)
    draft_parameters = _parameters(draft.path or defaults.DRAFT.path)
    needed = (
        target.size_bytes
        + kv_cache_bytes(target.resolved_path, n_ctx)
        + draft_parameters * DRAFT_BYTES_PER_PARAMETER
    )
    return PairPlan(
        target,
        draft,
        needed,
        psutil.virtual_memory().available,
        scaled_prediction(target.facts.parameters, draft_parameters),
    )


def kv_cache_bytes(path: Path, n_ctx: int) -> int:
    """llama.cpp's f16 KV cache for n_ctx tokens, from the header (0 when it does not say)."""
    from engine.llama.memory import TARGET_KV_BYTES  # lazy: llama.cpp loads here, not at the app's start

    meta = read_header(path).metadata
    arch = meta.get("general.architecture", "")
    layers, heads = meta.get(f"{arch}.block_count", 0), meta.get(f"{arch}.attention.head_count", 0)
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", heads)
    width = meta.get(f"{arch}.embedding_length", 0)
    head_dim = meta.get(f"{arch}.attention.key_length", width // heads if heads else 0)
    return KvShape(layers, kv_heads, head_dim, TARGET_KV_BYTES).bytes_for(n_ctx)


def scaled_prediction(target_parameters: int, draft_parameters: int) -> dict | None:
    """The calibrated pair's estimate, each model's time scaled by its parameter count: a rough
    guide (attention does not scale so), labelled as such where it is shown."""
    model = costmodel.load()
    if model is None or not defaults.TARGET.path.is_file() or not defaults.DRAFT.path.is_file():
        return None
    estimate = model.estimate(PREDICTION_TOKENS, PREDICTION_KEEP)
    target_scale = target_parameters / _parameters(defaults.TARGET.path)
    draft_scale = draft_parameters / _parameters(defaults.DRAFT.path)
    baseline = estimate["baseline_ttft_s"] * target_scale
    spec = estimate["draft_s"] * draft_scale + estimate["target_prefill_s"] * target_scale
    return {
        "tokens": PREDICTION_TOKENS,
        "keep": PREDICTION_KEEP,
        "baseline_ttft_s": baseline,
        "spec_ttft_s": spec,
        "speedup": baseline / spec if spec > 0 else 0.0,
    }


def _parameters(path: Path) -> int:
    return read_header(path).n_parameters


def _verdict(target: Path, draft: Path) -> str:
    from engine.pipeline.vocab_check import (
        compare_files,  # lazy: llama.cpp loads here, not at the app's start
    )

    try:
        return compare_files(target, draft).verdict
    except (OSError, ValueError):
        return "different"
