"""The local speed calculator: a fitted cost model of this machine's draft and target.

The pipeline asks it whether SpecPrefill pays off for a prompt (the auto-bypass).
`engine.eval.calibrate` times the target's prefill and the draft's scoring at a few prompt lengths
and fits seconds = c + a*n + b*n^2 to each (the n^2 term is attention). `estimate`
predicts baseline and SpecPrefill TTFT from the fit, with no model loaded. A windowed
draft prefill computes fewer attention pairs, so its n^2 is replaced by the attention
area it really covers (`attention_area`); the per-pair cost b is the same.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from engine.core.atomic import write_text_atomic
from engine.core.errors import NotCalibratedError, SpecPrefillError
from engine.core.paths import calibration_path
from engine.core.private import private_dir
from engine.core.settings import DRAFT_PREFILL_CHUNK, DRAFT_WINDOW_SINKS, RunSettings
from engine.models.untrusted import load_json_object

CALIBRATION_MAX_BYTES = 1 << 20  # a calibration file is a few KB: a larger one is not one


@dataclass(frozen=True)
class Quadratic:
    c: float
    a: float
    b: float

    def __call__(self, n: float, area: float | None = None) -> float:
        """Seconds for n tokens; `area` replaces n^2 where attention covers less than the full square."""
        return self.c + self.a * n + self.b * (n * n if area is None else area)


def attention_area(
    n: int, window: int = 0, chunk: int = DRAFT_PREFILL_CHUNK, sinks: int = DRAFT_WINDOW_SINKS
) -> float:
    """Twice the (query, key) pairs of the draft's chunked prefill: n^2 with full attention.

    With a window, a chunk past the first `sinks + window` tokens sees only that many earlier
    keys (see engine.draft.scorer.window_keys), so the area grows linearly from there.
    """
    total = 0
    for start in range(0, n, chunk):
        q = min(chunk, n - start)
        earlier = start if window <= 0 or start <= sinks + window else sinks + window
        total += 2 * q * earlier + q * q
    return float(total)


def fit_quadratic(ns: list[int], seconds: list[float]) -> Quadratic:
    """Least squares with non-negative coefficients (drop a term that fits negative, refit)."""
    x = np.asarray(ns, dtype=np.float64)
    y = np.asarray(seconds, dtype=np.float64)
    columns = {"c": np.ones_like(x), "a": x, "b": x * x}
    active = list(columns)
    while True:
        design = np.stack([columns[k] for k in active], axis=1)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        fitted = dict(zip(active, coef))
        negative = [k for k in active if fitted[k] < 0]
        if not negative or len(active) == 1:
            break
        active.remove(min(negative, key=lambda k: fitted[k]))
    return Quadratic(**{k: max(0.0, float(fitted.get(k, 0.0))) for k in columns})


@dataclass
class CostModel:
    target_prefill: Quadratic
    draft: Quadratic
    chunk_size: int = RunSettings.chunk_size
    measurements: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)

    def kept_tokens(self, n_tokens: int, keep: float) -> int:
        """Tokens the target prefills: the top chunks, and never fewer than the first chunk and the
        question's chunk, which are always kept."""
        n_chunks = math.ceil(n_tokens / self.chunk_size)
        return min(n_tokens, max(math.ceil(keep * n_chunks), 2) * self.chunk_size)

    def shortest_calibrated(self) -> int:
        """The shortest prompt the draft was timed at: below it a prediction is an extrapolation."""
        lengths = [int(n) for n in self.measurements.get("draft", {})]
        return min(lengths) if lengths else 0

    def baseline_ttft(self, n_tokens: int) -> float:
        return self.target_prefill(n_tokens)

    def draft_time(self, n_tokens: int, window: int = 0) -> float:
        return self.draft(n_tokens, attention_area(n_tokens, window))

    def segmented_draft_time(self, n_tokens: int, window: int = 0, pass_tokens: int | None = None) -> float:
        """The draft's time when a prompt longer than one pass is scored in equal segments
        (engine.draft.segments); one pass otherwise."""
        n_segments = 1 if not pass_tokens or n_tokens <= pass_tokens else math.ceil(n_tokens / pass_tokens)
        return n_segments * self.draft_time(math.ceil(n_tokens / n_segments), window)

    def estimate(
        self,
        n_tokens: int,
        keep: float,
        window: int = 0,
        budget: int | None = None,
        pass_tokens: int | None = None,
    ) -> dict:
        """Predicted TTFTs. `budget`: tokens the target's window takes (a longer prompt is cut for the
        full prefill, and SpecPrefill keeps at most that many); `pass_tokens`: the longest prompt one
        draft pass scores."""
        fits = budget is None or n_tokens <= budget
        base = self.baseline_ttft(n_tokens if fits else budget)
        draft = self.segmented_draft_time(n_tokens, window, pass_tokens)
        kept = self.kept_tokens(n_tokens, keep) if fits else min(self.kept_tokens(n_tokens, keep), budget)
        target = self.target_prefill(kept)
        spec = draft + target
        return {
            "tokens": n_tokens,
            "keep": keep,
            "draft_window": window,
            "baseline_ttft_s": base,
            "spec_ttft_s": spec,
            "draft_s": draft,
            "target_prefill_s": target,
            "speedup": base / spec if spec > 0 else 0.0,
            "fits": fits,
            "kept_tokens": kept,
        }

    def window_limits(self, max_new_tokens: int, lookahead: int) -> tuple[int | None, int | None]:
        """The estimate's `budget` and `pass_tokens` for the windows this calibration was made with
        (target context, draft's trained positions); None where an older file does not say."""
        n_ctx, trained = self.machine.get("n_ctx"), self.machine.get("draft_trained_window")
        return (n_ctx - max_new_tokens if n_ctx else None), (trained - lookahead if trained else None)

    def bypass_reason(self, n_tokens: int, keep: float, window: int = 0, margin: float = 1.05) -> str:
        """The auto-bypass rule: why SpecPrefill would not run ("" when it is predicted to win
        by `margin`). Never on prompts shorter than the calibration measured: a fit's constant
        terms are least sure there, and the time to gain is a second or two."""
        shortest = self.shortest_calibrated()
        if n_tokens < shortest:
            return (
                f"{n_tokens} tokens is below {shortest}, the shortest prompt this machine was calibrated at"
            )
        est = self.estimate(n_tokens, keep, window)
        if est["baseline_ttft_s"] >= margin * est["spec_ttft_s"]:
            return ""
        return (
            f"predicted SpecPrefill TTFT {est['spec_ttft_s']:.1f}s is not below full prefill "
            f"{est['baseline_ttft_s']:.1f}s at {n_tokens} tokens"
        )

    def pays_off(self, n_tokens: int, keep: float, window: int = 0, margin: float = 1.05) -> bool:
        return not self.bypass_reason(n_tokens, keep, window, margin)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> CostModel:
        return cls(
            target_prefill=Quadratic(**data["target_prefill"]),
            draft=Quadratic(**data["draft"]),
            chunk_size=data.get("chunk_size", RunSettings.chunk_size),
            measurements=data.get("measurements", {}),
            machine=data.get("machine", {}),
        )


def save(model: CostModel, path: Path | None = None) -> Path:
    path = path or calibration_path()
    private_dir(path.parent)  # the cache's root is the user's alone; another folder is left as it is
    write_text_atomic(path, json.dumps(model.to_json(), indent=2))
    return path


def load(path: Path | None = None) -> CostModel | None:
    path = path or calibration_path()
    try:
        return CostModel.from_json(load_json_object(path, CALIBRATION_MAX_BYTES))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise NotCalibratedError(f"{path} is not a valid calibration file ({exc})") from exc


def load_matching(info, path: Path | None = None) -> CostModel | None:
    """The calibration, if it was measured with the same target, draft and devices; else None.

    A broken calibration file is ignored here (the run goes on with the fixed threshold);
    `specprefill estimate` reports it.
    """
    try:
        model = load(path)
    except SpecPrefillError:
        return None
    if model is None:
        return None
    machine = model.machine
    same = (
        machine.get("target") == str(info.target_path)
        and machine.get("draft") == str(info.draft_path)
        and machine.get("device") == info.device
        and machine.get("target_device", "CPU") == info.target_device  # older files: CPU-only builds
        and machine.get("flash_attn", "auto") == info.flash_attn
    )  # older files: llama.cpp's auto
    return model if same else None


def require(path: Path | None = None) -> CostModel:
    model = load(path)
    if model is None:
        raise NotCalibratedError("this machine is not calibrated yet")
    return model
