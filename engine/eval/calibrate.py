"""Calibration: time this machine's target prefill and draft scoring, then fit the cost model.

The draft is timed with full attention, so the n^2 term is measured; estimates for a
windowed prefill scale it by the attention area (engine.pipeline.costmodel).

`calibrate` yields each timing as it is measured; `measure` drives it and tells a progress
callback what it times next; `calibrate_machine` also stores the fitted model and gives it to
the engine. Cancel is honoured between timings and inside each (the timing helpers take the
token), and a cancelled calibration stores nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from engine.core.cancel import NEVER, CancelToken
from engine.core.resources import calibration_sample
from engine.core.settings import ModelSettings, RunSettings
from engine.core.steps import StepFn
from engine.pipeline import costmodel
from engine.pipeline.costmodel import CostModel, fit_quadratic

if TYPE_CHECKING:
    from engine.pipeline import Engine

DEFAULT_LENGTHS = (1024, 4096, 8192)  # spread: the n^2 term shows
ROLES = ("target", "draft")
ROLE_WORDS = {"target": "the target's prefill", "draft": "the draft's scoring"}

# progress(done, total, message): done and total in tokens timed; the message says what is timed next.
ProgressFn = Callable[[int, int, str], None]


class Measurement(NamedTuple):
    """One timing; unpacks as (role, tokens, seconds)."""

    role: str  # "target" | "draft"
    tokens: int
    seconds: float


def plan(lengths: Sequence[int]) -> list[tuple[str, int]]:
    """The timings `calibrate` makes, in its order: at each length the target, then the draft."""
    return [(role, n) for n in lengths for role in ROLES]


def calibrate(
    engine: Engine,
    text: str,
    lengths: Sequence[int],
    lookahead: int = RunSettings.lookahead,
    kernel: int = RunSettings.kernel,
    cancel: CancelToken = NEVER,
    on_step: StepFn | None = None,
) -> Iterator[Measurement | CostModel]:
    """Yields a Measurement per timing, then the fitted CostModel; on_step gets each timing's batches."""
    tokens = engine.sample_tokens(text, max(lengths), "calibration")
    draft_settings = RunSettings(lookahead=lookahead, kernel=kernel, draft_window=0)
    timers = {
        "target": lambda part: engine.time_prefill(part, cancel, on_step),
        "draft": lambda part: engine.time_draft(part, draft_settings, cancel, on_step),
    }
    measured: dict[str, dict[int, float]] = {role: {} for role in ROLES}
    for role, n in plan(lengths):
        cancel.raise_if_cancelled()
        measured[role][n] = timers[role](tokens[:n])
        yield Measurement(role, n, measured[role][n])
    yield fit_cost_model(measured, engine.info)


def fit_cost_model(measured: dict[str, dict[int, float]], info) -> CostModel:
    """A quadratic per role through its timings; `machine` names what was timed, for load_matching."""
    fits = {role: fit_quadratic(list(m), list(m.values())) for role, m in measured.items()}
    return CostModel(
        target_prefill=fits["target"],
        draft=fits["draft"],
        measurements={role: {str(n): s for n, s in m.items()} for role, m in measured.items()},
        machine={
            "target": str(info.target_path),
            "draft": str(info.draft_path),
            "device": info.device,
            "target_device": info.target_device,
            "flash_attn": info.flash_attn,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            **_windows(info),
        },
    )


def _windows(info) -> dict:
    """The target's context and (when known) the draft's trained positions, for estimates past them."""
    trained = info.draft_trained_window
    return {"n_ctx": info.n_ctx, **({"draft_trained_window": trained} if trained else {})}


def step_message(steps: list[tuple[str, int]], index: int) -> str:
    """What is timed at `index` of the plan ("fitting" once all are measured)."""
    if index >= len(steps):
        return "fitting the cost model"
    role, n = steps[index]
    return f"timing {ROLE_WORDS[role]} of {n:,} tokens ({index + 1} of {len(steps)})"


def _no_progress(done: int, total: int, message: str) -> None:
    pass


def measure(
    engine: Engine,
    text: str,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    progress: ProgressFn | None = None,
    cancel: CancelToken = NEVER,
    *,
    lookahead: int = RunSettings.lookahead,
    kernel: int = RunSettings.kernel,
    on_measurement: Callable[[Measurement], None] | None = None,
) -> CostModel:
    """Run `calibrate`, reporting before each timing; the fitted model, stored nowhere.

    A timing's share of the bar is its tokens: a rough stand-in for its time (which grows a
    little faster than the tokens); `done` only ever grows.
    """
    report = progress or _no_progress
    steps = plan(lengths)
    total, done = sum(n for _, n in steps), 0
    report(done, total, step_message(steps, 0))
    model = None

    def within_timing(step_done: int, step_total: int) -> None:
        """The bar moves during a long timing too (a target prefill of 8K tokens takes minutes here)."""
        index = len(measured)  # the timing under way
        n = steps[index][1]
        report(done + n * step_done // max(step_total, 1), total, step_message(steps, index))

    measured: list[Measurement] = []
    for index, item in enumerate(calibrate(engine, text, lengths, lookahead, kernel, cancel, within_timing)):
        if isinstance(item, CostModel):
            model = item  # the last item
        else:
            measured.append(item)
            done += item.tokens
            if on_measurement is not None:
                on_measurement(item)
            report(done, total, step_message(steps, index + 1))
    return model


def calibrate_machine(
    engine: Engine,
    settings: ModelSettings | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken = NEVER,
    *,
    text: str | None = None,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    path: Path | None = None,
    on_measurement: Callable[[Measurement], None] | None = None,
) -> CostModel:
    """Time this machine, store the cost model (at `path`, else the cache's calibration file) and
    give it to the engine, so its predictions and auto-bypass use it at once.

    `settings` are the ones the engine was loaded with: the file records its draft quantization
    and threads. Cancelled (Cancelled raised), nothing is stored and the engine keeps its model.
    """
    sample = text if text is not None else calibration_sample()
    model = measure(engine, sample, lengths, progress, cancel, on_measurement=on_measurement)
    cancel.raise_if_cancelled()  # a Cancel that came as the last timing ended still means: store nothing
    settings = settings or ModelSettings()
    model.machine.update(draft_quant=settings.draft_quant, threads=settings.n_threads)
    costmodel.save(model, path)
    engine.cost_model = model
    return model
