"""SpecPrefill's run of one request, start to end: the draft scores the prompt (in one pass, or in
segments for a prompt longer than its window, with a session's cached draft keys), the selection
keeps chunks, the target prefills only the kept tokens and decodes. A draft of another model family
(EngineInfo.draft_vocab) scores and selects in its own tokens (a session's cached draft keys are
in them too), and the selection reaches the target through the document's characters
(span_selection). Runner.spec hands a run here once it is not bypassed; the target's prefill and
decode are the Runner's (PrefillAndGenerate, handed in)."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from engine.core.cancel import CancelToken
from engine.core.events import (
    EngineEvent,
    Notice,
    RunFinished,
    RunResult,
    Selection,
    SelectionMade,
    StageChanged,
)
from engine.core.memory import require_fits
from engine.core.settings import RunSettings
from engine.draft.memory import draft_scoring_need
from engine.draft.scorer import DraftPrefix, DraftScorer, ScoringParams
from engine.draft.segments import iter_score_segments, plan_segments
from engine.draft.selection import scored_chunks
from engine.llama.prompt import PreparedPrompt, token_char_offsets
from engine.llama.runtime import TargetRuntime
from engine.pipeline.draft_cache import DocumentSegments
from engine.pipeline.engine_open import EngineInfo
from engine.pipeline.fitting import seen_fraction
from engine.pipeline.kept_positions import place_kept
from engine.pipeline.peak_memory import PeakMemory
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.request import Request, progress_events
from engine.pipeline.run_policy import RunPolicy
from engine.pipeline.selection_plan import SelectionPlan, focus_notice, plan_request_selection, wanted_parts
from engine.pipeline.session import DocumentSession
from engine.pipeline.span_selection import draft_budget, draft_prompt, map_kept, prompt_token_spans, starts_of

# A budget whose mapped tokens overflow the target's window is tried again this much smaller, so
# many times at most (the two tokenizers' ratio varies along a document).
BUDGET_SHRINK, BUDGET_TRIES = 0.9, 4


class PrefillAndGenerate(Protocol):
    """The target's prefill of `tokens` at `positions` from an empty KV cache, then the answer
    streamed from `next_position`; returns the timing fields of RunResult (Runner.prefill_and_generate)."""

    def __call__(
        self, request: Request, tokens: np.ndarray, positions: np.ndarray, next_position: int
    ) -> Generator[EngineEvent, None, dict]: ...


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


def draft_stage_text(n_tokens: int, draft_prefix: DraftPrefix | None, n_segments: int, held: int = 0) -> str:
    if draft_prefix is not None and draft_prefix.complete:
        return f"draft scoring {n_tokens - len(draft_prefix)} tokens (the document from the draft cache)"
    if draft_prefix is not None and draft_prefix.filled:
        return f"draft scoring {n_tokens - draft_prefix.filled} tokens (the document's read part from the draft cache)"
    if n_segments > 1:
        cached = f"; {held} of them from the draft cache" if held else ""
        return f"draft scoring {n_tokens} tokens in {n_segments} segments (longer than the draft's window{cached})"
    return f"draft scoring {n_tokens} tokens"


def spec_served_by(session: DocumentSession | None, reused_prefix: int, read_ahead_s: float = 0.0) -> str:
    if session is None:
        return ""  # one-shot runs say nothing of caches
    if reused_prefix and read_ahead_s:
        return "spec_read_ahead"
    return "spec_cached_draft" if reused_prefix else "spec"


@dataclass(eq=False)
class SpecRun:
    """SpecPrefill on the main runtime: the draft's scoring, the selection and the result; the
    target's prefill and decode through `prefill_and_generate`. The caller holds the target."""

    runtime: TargetRuntime
    scorer: DraftScorer
    info: EngineInfo
    policy: RunPolicy
    prefixes: PrefixCaches
    prefill_and_generate: PrefillAndGenerate

    def run(self, request: Request, session: DocumentSession | None = None) -> Iterator[EngineEvent]:
        """One SpecPrefill run of a request the policy did not bypass."""
        run, prompt, settings, window = request.run, request.prompt, request.settings, request.window
        placement = self.policy.resolve_positions(settings.positions, window.fits)
        if placement != settings.positions and settings.positions == "restore":
            yield Notice(
                run, "restore would place tokens past the target's window: the gaps were compressed instead"
            )
        budget = self.policy.selection_budget(
            prompt, settings
        )  # before the draft: a question too long fails at once
        if self.info.draft_vocab is not None:  # another family's draft: select through character spans
            yield from self.by_spans(request, placement, budget, session)
            return
        score, draft_s, draft_peak = yield from self._draft_scores(request, session)

        t_select = time.perf_counter()
        yield StageChanged(run, "select")
        offsets = token_char_offsets(self.runtime.model, prompt)  # about 0.2 s at 83K tokens
        parts, focus, definitions = self._segment_parts(request, offsets)
        plan = plan_request_selection(
            score.importance, prompt, settings, budget, parts, offsets, focus, definitions
        )
        chosen = ChosenTokens(plan, plan.kept_idx, prompt, offsets, "tokens")
        cost = DraftCost(draft_s, draft_peak, t_select)
        yield from self.finish_scored(request, chosen, placement, cost, session, score.reused_prefix)

    # -- a draft of another family: through character spans --------------------------------
    def by_spans(
        self, request: Request, placement: str, budget: int | None, session: DocumentSession | None = None
    ) -> Iterator[EngineEvent]:
        """One SpecPrefill run through character spans; `budget`: the target tokens the selection may
        keep (None: the prompt fits). A session's draft keys are kept in the draft's own tokens."""
        run, target, settings = request.run, request.prompt, request.settings
        vocab = self.info.draft_vocab
        draft = draft_prompt(vocab, target, settings.system_prompt)
        draft_request = replace(request, prompt=draft)
        score, draft_s, draft_peak = yield from self._draft_scores(request, session, draft)

        t_select = time.perf_counter()
        yield StageChanged(run, "select")
        draft_spans = prompt_token_spans(vocab, draft)
        target_spans = prompt_token_spans(self.runtime.model, target)
        offsets = starts_of(draft_spans)
        parts, focus, definitions = self._segment_parts(draft_request, offsets)
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
        cost = DraftCost(draft_s, draft_peak, t_select)
        yield from self.finish_scored(request, chosen, placement, cost, session, score.reused_prefix)

    def finish_scored(
        self,
        request: Request,
        chosen: ChosenTokens,
        placement: str,
        cost: DraftCost,
        session: DocumentSession | None,
        reused_prefix: int,
    ) -> Iterator[EngineEvent]:
        """finish(), saying how the session served the draft (spec_served_by) and handing the answer
        the read-ahead's seconds not yet reported."""
        read_ahead_s = session.take_read_ahead() if session is not None else 0.0
        served_by = spec_served_by(session, reused_prefix, read_ahead_s)
        yield from self.finish(
            request, chosen, placement, cost, served_by=served_by, read_ahead_s=read_ahead_s
        )

    # -- the draft's scores -----------------------------------------------------------------
    def _draft_scores(
        self, request: Request, session: DocumentSession | None, draft: PreparedPrompt | None = None
    ):
        """The draft's scores of the prompt it reads (the target's, or `draft`: the same in its own
        tokens), with the session's cached draft keys when there are any (kept for the next question
        after); returns (scores, seconds, peak memory bytes)."""
        run, settings, window = request.run, request.settings, request.window
        prompt = request.prompt if draft is None else draft
        segment_cache = self.prefixes.draft_segments(session, settings)
        pieces = plan_segments(
            prompt.n_tokens,
            prompt.doc_token_span,
            self.policy.draft_pass_tokens(settings),
            follow_ups=segment_cache is not None,
        )
        doc_start, doc_end = prompt.doc_token_span
        self._require_draft_memory(
            max(b - a for a, b in pieces) + prompt.n_tokens - (doc_end - doc_start),
            ScoringParams.from_settings(settings, prompt.question_rows).question_rows,
        )
        # The target's prefix noted only for a prompt that fits (a background fill completes it); the
        # draft's keys for any, in its tokens: the whole prefix when it scores the prompt in one pass,
        # else each segment's.
        key = None
        if session is not None:
            if window.fits:
                self.prefixes.session_prefix(session, request)
            key = self.prefixes.draft_key(session, settings)
        one_pass = len(pieces) == 1
        draft_prefix = (
            self.prefixes.draft_prefix(key, prompt.tokens[: prompt.tail_start], settings.draft_window)
            if key is not None and one_pass
            else None
        )
        segments = segment_cache if not one_pass else None

        t_draft = time.perf_counter()
        tokens = prompt.tokens.tolist()
        held = segments.count_held(pieces, tokens, prompt.doc_token_span) if segments else 0
        yield StageChanged(run, "draft", draft_stage_text(prompt.n_tokens, draft_prefix, len(pieces), held))
        with PeakMemory(self.info.device) as draft_mem:
            score = yield from progress_events(
                run,
                "draft",
                self._iter_score(tokens, prompt, settings, request.cancel, draft_prefix, segments),
            )
        draft_s = time.perf_counter() - t_draft
        problem = ""
        if draft_prefix is not None:
            problem = self.prefixes.keep_draft_prefix(key, draft_prefix)
        elif segments is not None:
            problem = self.prefixes.segments_kept_note(segments, pieces, tokens, prompt.doc_token_span)
        if problem:
            yield Notice(run, problem)
        return score, draft_s, self._draft_peak_bytes(draft_mem)

    def _segment_parts(self, request: Request, offsets: list[int]):
        """The pages or files to cover, and the named files and definitions to keep first (label and
        token range), as far as this request needs them."""
        prompt, settings = request.prompt, request.settings
        wanted = wanted_parts(settings, prompt.parts.question, prompt.parts.document, request.segments)
        if not wanted:
            return [], (), ()
        return wanted.in_tokens(offsets, len(prompt.parts.prefix), prompt.doc_token_span)

    def _iter_score(
        self,
        tokens: list[int],
        prompt: PreparedPrompt,
        settings: RunSettings,
        cancel: CancelToken,
        draft_prefix: DraftPrefix | None,
        segments: DocumentSegments | None = None,
    ):
        """The draft's scores: one pass (with the cached prefix when there is one), or segments for a
        prompt longer than the draft was trained on (with their cached heads and slices)."""
        params = ScoringParams.from_settings(settings, prompt.question_rows)
        if draft_prefix is not None:
            return self.scorer.iter_score(tokens, params, cancel, draft_prefix)
        return iter_score_segments(
            self.scorer,
            tokens,
            prompt.doc_token_span,
            self.policy.draft_pass_tokens(settings),
            params,
            cancel,
            segments,
        )

    def _require_draft_memory(self, n_prompt: int, question_rows: int) -> None:
        """The draft's cache grows with the prompt: refuse before scoring rather than die in it."""
        model = self.scorer.model
        bytes_per_value = next(model.parameters()).dtype.itemsize
        require_fits(
            draft_scoring_need(model.config, bytes_per_value, n_prompt, question_rows), self.info.device
        )

    def _draft_peak_bytes(self, measured: PeakMemory) -> int:
        """The draft's footprint while scoring: weights plus the working set's peak (CUDA counts both)."""
        if self.info.device.startswith("cuda"):
            return measured.peak_bytes
        return self.info.draft_memory_bytes + measured.peak_bytes

    # -- the end, the same by token ids and by character spans ------------------------------
    def finish(
        self, request: Request, chosen: ChosenTokens, placement: str, cost: DraftCost, **result_fields
    ) -> Iterator[EngineEvent]:
        """Place the kept tokens, show the selection, prefill and decode, and report the result;
        `result_fields`: what only one path reports (served_by, read_ahead_s)."""
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
        result = yield from self.prefill_and_generate(
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
                draft_precision=self.info.draft_precision,
                **result_fields,
                **result,
            ),
        )


def _plan_within(
    importance, draft, draft_spans, target, target_spans, budget, settings, wanted
) -> tuple[SelectionPlan, np.ndarray]:
    """The draft's selection and the target tokens it maps to, within `budget` target tokens (the
    draft's chunk scores computed once for all the tries)."""
    parts, offsets, focus, definitions = wanted
    chunked = scored_chunks(importance, settings.chunk_size, draft.tail_start)
    shrink = 1.0
    for _ in range(BUDGET_TRIES):
        limit = draft_budget(budget, draft.n_tokens, target.n_tokens, shrink)
        plan = plan_request_selection(
            importance, draft, settings, limit, parts, offsets, focus, definitions, chunked
        )
        kept_idx = map_kept(draft, draft_spans, plan.kept_idx, target, target_spans)
        if budget is None or len(kept_idx) <= budget:
            break
        shrink *= BUDGET_SHRINK * budget / len(kept_idx)
    return plan, kept_idx


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
