"""The draft's number format on this machine: chosen by measurement, once per CPU, torch and draft.

On a GPU the draft runs in half precision. On a CPU the fastest format depends on the CPU: on a
Xeon with AMX, torch's bf16 matmul ran a plain forward of the default draft over 4,096 tokens in
6.4 s against 12.6 s in dynamic int8 (2026-12-07); on a 2-core AMD EPYC without AVX-512, one
scoring pass over 1,024 tokens took 13.5 s in int8, 25.5 s in fp32 and 96 s in bf16 (emulated;
2026-12-08, research/draft-precision). So with `draft_quant` "auto" the first load on a CPU:

1. times one short forward in each format (int8, bf16, fp32), the draft loaded anew for each;
2. takes the formats faster than fp32, fastest first, and keeps the first whose selection over a
   fixed sample (the calibration text, 1,024 tokens, 16-token chunks, keep 0.2, 8 look-ahead steps)
   keeps at least AGREEMENT_MIN of what fp32's selection keeps; else fp32.

What is kept is measured as fp32's own scores: the chunks a format keeps must hold 95% of the score
that fp32's chosen chunks hold. The share of the very same chunks is recorded too (`overlap`), but
does not decide: chunks whose scores nearly tie swap places under any rounding, so int8 kept only
85% of fp32's chunks (92% for SmolLM2) at 2,048 tokens while those held 97-99.7% of fp32's score
(2026-12-08); a rule on the same chunks would rule int8 out on every CPU, at twice fp32's cost.

The verdict is cached per CPU (model name and flags), torch version and draft file, as the CPU
self-test's is; `doctor`, `bench` and every result name the format in use (`draft_precision`).
SPECPREFILL_DRAFT_PRECISION=int8|bf16|fp32 in the environment sets the format without a measurement
(as SPECPREFILL_CPU_VARIANT sets llama.cpp's CPU variant): for a CPU whose measurement misleads, and
for tests that must not depend on timings.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from engine.core.cpu import cpu_identity
from engine.core.errors import SettingsError
from engine.core.hashing import file_version_id
from engine.core.verdicts import read_verdicts, write_verdict
from engine.draft.scorer import DraftScorer, ScoringParams
from engine.draft.selection import chunk_scores

log = logging.getLogger(__name__)

CPU_FORMATS = ("int8", "bf16", "fp32")  # what "auto" chooses from on a CPU
SETTING_FORMAT = {"int8": "int8", "bf16": "bf16", "none": "fp32"}  # draft_quant -> format
TIMING_TOKENS = 128  # one forward's tokens for the timing: bf16 without AMX is slow
SAMPLE_TOKENS = 1024  # the agreement sample's tokens
AGREEMENT_CHUNK = 16  # tokens per chunk in the agreement check (64 chunks over the sample)
AGREEMENT_KEEP = 0.2  # the share of chunks kept in the agreement check, as SpecPrefill's default
AGREEMENT_LOOKAHEAD = 8  # the look-ahead steps that score the sample, as SpecPrefill's default
AGREEMENT_MIN = 0.95  # a format's kept chunks must hold this share of fp32's kept score
VERDICT_FILE = "draft-precision.json"
PRECISION_ENV = "SPECPREFILL_DRAFT_PRECISION"

LoadDraft = Callable[[str], object]  # a format -> the draft's transformers model in it


@dataclass(frozen=True)
class DraftPrecision:
    """The draft's number format and why; what doctor and the results show."""

    precision: str  # "int8" | "bf16" | "fp32" | "fp16" (a GPU without bf16)
    reason: str  # one line: set by the user, a GPU's half precision, or the measurement
    seconds_per_1k: dict[str, float] = field(default_factory=dict)  # the timing, per format
    agreement: dict[str, float] = field(default_factory=dict)  # the share of fp32's kept score held
    measured_at: str = ""  # ISO date of the measurement; "" when nothing was measured
    overlap: dict[str, float] = field(default_factory=dict)  # the share of fp32's very chunks kept

    def summary(self) -> str:
        return f"{self.precision} ({self.reason})"


def fixed_precision(setting: str, device: torch.device, dtype: torch.dtype) -> DraftPrecision | None:
    """The format when no measurement is needed: a GPU's half precision, or the one the user set;
    None: "auto" on a CPU, which measure_or_cached decides."""
    if device.type != "cpu":
        name = "bf16" if dtype == torch.bfloat16 else "fp16"
        return DraftPrecision(name, f"half precision on {device.type}")
    if setting != "auto":
        return DraftPrecision(SETTING_FORMAT[setting], f"set: draft quant {setting}")
    forced = os.environ.get(PRECISION_ENV, "").strip().lower()
    if forced:
        if forced not in CPU_FORMATS:
            raise SettingsError(f"{PRECISION_ENV}={forced}: use one of {', '.join(CPU_FORMATS)}")
        return DraftPrecision(forced, f"forced: {PRECISION_ENV}={forced}")
    return None


def int8_available() -> bool:
    """Whether this torch still has the dynamic int8 quantization the int8 format uses."""
    quantization = getattr(getattr(torch, "ao", None), "quantization", None)
    return callable(getattr(quantization, "quantize_dynamic", None)) and (
        "fbgemm" in torch.backends.quantized.supported_engines
        or "x86" in torch.backends.quantized.supported_engines
    )


def verdict_key(draft_path: Path) -> str:
    """The CPU, the torch build and the draft file's version: a verdict holds for these."""
    return f"{cpu_identity()}|{torch.__version__}|{file_version_id(draft_path)}"


def verdict_path() -> Path:
    from engine.core.paths import cache_dir

    return cache_dir() / VERDICT_FILE


def cached_verdict(key: str) -> DraftPrecision | None:
    record = read_verdicts(verdict_path()).get(key)
    try:
        return DraftPrecision(**record) if isinstance(record, dict) else None
    except TypeError:  # a record of other fields
        return None


def remember_verdict(key: str, verdict: DraftPrecision) -> None:
    """Add the verdict to the cache file; a read-only or full cache only means it is measured again."""
    try:
        write_verdict(verdict_path(), key, asdict(verdict))
    except OSError as exc:
        log.info("the draft's precision verdict was not saved (%s): it is measured again next time", exc)


def cached_precision(draft_path: Path) -> DraftPrecision | None:
    """The verdict measured earlier for this CPU, torch and draft; None: not measured yet."""
    return cached_verdict(verdict_key(draft_path))


def measure_or_cached(
    draft_path: Path,
    load: LoadDraft,
    sample: Callable[[], list[int]],
    announce: Callable[[], None] | None = None,
) -> DraftPrecision:
    """The cached verdict for this CPU, torch and draft, or a new measurement (then cached) over
    `sample()`'s tokens, `announce` told first: neither is called when the verdict is cached."""
    key = verdict_key(draft_path)
    verdict = cached_verdict(key)
    if verdict is None:
        if announce:
            announce()
        verdict = measure_precisions(load, sample())
        remember_verdict(key, verdict)
    return verdict


def measure_precisions(load: LoadDraft, sample: list[int]) -> DraftPrecision:
    """Time each CPU format, then check the faster ones against fp32's selection (module doc)."""
    formats = [f for f in CPU_FORMATS if f != "int8" or int8_available()]
    timing = {f: forward_seconds_per_1k(load(f), sample[:TIMING_TOKENS]) for f in formats}
    faster = sorted((f for f in formats if f != "fp32" and timing[f] < timing["fp32"]), key=timing.get)
    agreement: dict[str, float] = {}
    overlap: dict[str, float] = {}
    chosen, why = "fp32", "no format was faster than fp32"
    if faster:
        reference = chunk_importance(load("fp32"), sample)
        for name in faster:
            agreement[name], overlap[name] = selection_agreement(
                chunk_importance(load(name), sample), reference
            )
            if agreement[name] >= AGREEMENT_MIN:
                chosen, why = name, f"the fastest whose chunks hold {AGREEMENT_MIN:.0%} of fp32's kept score"
                break
        else:
            why = f"the faster formats' chunks held less than {AGREEMENT_MIN:.0%} of fp32's kept score"
    times = ", ".join(f"{f} {timing[f]:.1f} s" for f in sorted(timing, key=timing.get))
    reason = f"measured on this CPU: {times} per 1K tokens; {why}"
    log.info("draft precision: %s (%s)", chosen, reason)
    return DraftPrecision(
        chosen,
        reason,
        {f: round(s, 3) for f, s in timing.items()},
        {f: round(a, 4) for f, a in agreement.items()},
        time.strftime("%Y-%m-%d"),
        {f: round(a, 4) for f, a in overlap.items()},
    )


def forward_seconds_per_1k(model, tokens: list[int]) -> float:
    """Seconds per 1K tokens of one forward of the draft's body (after a first, untimed short one)."""
    with torch.inference_mode():
        model.model(input_ids=torch.tensor([tokens[:8]]))
        started = time.perf_counter()
        model.model(input_ids=torch.tensor([tokens]))
        seconds = time.perf_counter() - started
    return seconds * 1000 / len(tokens)


def chunk_importance(model, sample: list[int]) -> np.ndarray:
    """The draft's mean importance per AGREEMENT_CHUNK-token chunk of the sample."""
    params = ScoringParams(lookahead=AGREEMENT_LOOKAHEAD)
    return chunk_scores(DraftScorer(model, set()).score(sample, params).importance, AGREEMENT_CHUNK)


def selection_agreement(scores: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(the share of the reference's kept score that `scores`' kept chunks hold, the share of the
    very chunks both keep), with the top AGREEMENT_KEEP of the chunks kept."""
    n_keep = max(1, round(len(reference) * AGREEMENT_KEEP))
    kept = np.argsort(-scores, kind="stable")[:n_keep]
    best = np.argsort(-reference, kind="stable")[:n_keep]
    held = float(reference[kept].sum() / reference[best].sum()) if reference[best].sum() > 0 else 1.0
    return held, len(set(kept.tolist()) & set(best.tolist())) / n_keep
