"""SpecPrefill with a draft of another model family: the draft scores and selects in its own
tokens, the selection reaches the target through the document's characters (span_selection),
and the target prefills its tokens of the kept spans. Runner.spec hands a run here when the
engine opened the draft's vocabulary beside it (EngineInfo.draft_vocab)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from engine.core.events import (
    EngineEvent,
    StageChanged,
)
from engine.pipeline.request import Request
from engine.pipeline.selection_plan import SelectionPlan, plan_request_selection
from engine.pipeline.span_selection import draft_budget, draft_prompt, map_kept, prompt_token_spans, starts_of
from engine.pipeline.spec_finish import ChosenTokens, DraftCost, finish_spec

# A budget whose mapped tokens overflow the target's window is tried again this much smaller, so
# many times at most (the two tokenizers' ratio varies along a document).
BUDGET_SHRINK, BUDGET_TRIES = 0.9, 4


def spec_by_spans(runner, request: Request, placement: str, budget: int | None) -> Iterator[EngineEvent]:
    """One SpecPrefill run through character spans, with the Runner's draft, prefill and decode
    (`runner`: engine.pipeline.runs.Runner, not imported: it imports this); `budget`: the target tokens the selection may
    keep (None: the prompt fits). Sessions' draft caches hold target tokens, so none is used."""
    run, target, settings = request.run, request.prompt, request.settings
    vocab = runner.info.draft_vocab
    draft = draft_prompt(vocab, target, settings.system_prompt)
    draft_request = replace(request, prompt=draft)
    score, draft_s, draft_peak = yield from runner._draft_scores(draft_request, None)

    t_select = time.perf_counter()
    yield StageChanged(run, "select")
    draft_spans = prompt_token_spans(vocab, draft)
    target_spans = prompt_token_spans(runner.runtime.model, target)
    offsets = starts_of(draft_spans)
    parts, focus, definitions = runner._segment_parts(draft_request, offsets)
    plan, kept_idx = _plan_within(
        score.importance,
        draft,
        draft_spans,
        target,
        target_spans,
        budget,
        settings,
        (parts, offsets, focus, definitions),
    )
    chosen = ChosenTokens(plan, kept_idx, draft, offsets, "spans")
    yield from finish_spec(runner, request, chosen, placement, DraftCost(draft_s, draft_peak, t_select))


def _plan_within(
    importance, draft, draft_spans, target, target_spans, budget, settings, wanted
) -> tuple[SelectionPlan, np.ndarray]:
    """The draft's selection and the target tokens it maps to, within `budget` target tokens."""
    parts, offsets, focus, definitions = wanted
    shrink = 1.0
    for _ in range(BUDGET_TRIES):
        limit = draft_budget(budget, draft.n_tokens, target.n_tokens, shrink)
        plan = plan_request_selection(importance, draft, settings, limit, parts, offsets, focus, definitions)
        kept_idx = map_kept(draft, draft_spans, plan.kept_idx, target, target_spans)
        if budget is None or len(kept_idx) <= budget:
            break
        shrink *= BUDGET_SHRINK * budget / len(kept_idx)
    return plan, kept_idx
