"""The end of a SpecPrefill run, the same by token ids and by character spans: place the kept
tokens, show the selection, prefill and decode, and report the result."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from engine.core.events import EngineEvent, Notice, RunFinished, RunResult, Selection, SelectionMade
from engine.llama.prompt import PreparedPrompt
from engine.pipeline.fitting import seen_fraction
from engine.pipeline.kept_positions import place_kept
from engine.pipeline.request import Request
from engine.pipeline.selection_plan import SelectionPlan, focus_notice


@dataclass(frozen=True)
class ChosenTokens:
    """What the selection kept, and over which prompt the app shows it."""

    plan: SelectionPlan
    kept_idx: np.ndarray  # indices into the target's prompt tokens
    shown: PreparedPrompt  # the prompt whose chunks were scored: the target's, or the draft's by spans
    offsets: list[int]  # each token's first character in `shown`
    selection: str  # "tokens" or "spans"


@dataclass(frozen=True)
class DraftCost:
    seconds: float
    peak_bytes: int
    select_started: float  # perf_counter() when the selection began


def finish_spec(
    runner, request: Request, chosen: ChosenTokens, placement: str, cost: DraftCost, **result_fields
) -> Iterator[EngineEvent]:
    """`runner`: engine.pipeline.runs.Runner (its prefill and decode); `result_fields`: what only
    one path reports (served_by, read_ahead_s)."""
    run, target, settings, window = request.run, request.prompt, request.settings, request.window
    plan, kept_idx = chosen.plan, chosen.kept_idx
    if plan.focused_parts:
        yield Notice(run, focus_notice(plan.focused_parts))
    kept_positions, next_position = place_kept(kept_idx, target.n_tokens, placement, window.budget)
    select_s = time.perf_counter() - cost.select_started
    start, end = target.doc_token_span
    seen = seen_fraction(
        window.document_tokens, int(np.count_nonzero((kept_idx >= start) & (kept_idx < end)))
    )
    if not window.fits:
        yield Notice(run, window.describe_selection(seen))
    # Before the target's prefill, which can take minutes: the app shows what was kept meanwhile.
    yield SelectionMade(run, _selection(chosen, settings.chunk_size))
    result = yield from runner._prefill_and_generate(
        request, target.tokens[kept_idx], kept_positions, next_position
    )
    yield RunFinished(
        run,
        RunResult(
            **request.result_fields(),
            draft_s=cost.seconds,
            select_s=select_s,
            kept_fraction=len(kept_idx) / target.n_tokens,
            positions=placement,
            draft_peak_mem_bytes=cost.peak_bytes,
            draft_window=settings.draft_window,
            fit="fits" if window.fits else "selected",
            seen_fraction=seen,
            keep_reason=plan.keep_reason,
            covered_parts=plan.covered_parts,
            focused_parts=list(plan.focused_parts),
            selection=chosen.selection,
            **result_fields,
            **result,
        ),
    )


def _selection(chosen: ChosenTokens, chunk_size: int) -> Selection:
    shown = chosen.shown
    return Selection(
        chunk_size=chunk_size,
        chunk_starts=list(range(0, shown.n_tokens, chunk_size)),
        chunk_scores=[float(s) for s in chosen.plan.scores],
        kept_chunks=chosen.plan.kept,
        protected_chunks=chosen.plan.protected,
        token_char_offsets=chosen.offsets,
        doc_char_span=shown.parts.doc_char_span,
    )
