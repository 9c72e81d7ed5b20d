"""The two ways to answer one request, as events: the full prefill (baseline) and SpecPrefill
(the draft scores, the selection keeps chunks, the target prefills only those), then the decode."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.events import (
    EngineEvent,
    Notice,
    Progress,
    RunFinished,
    RunName,
    RunResult,
    Stage,
    StageChanged,
    TokenGenerated,
)
from engine.core.memory import require_fits
from engine.core.settings import RunSettings
from engine.core.steps import Steps, map_steps
from engine.draft.memory import draft_scoring_need
from engine.draft.scorer import DraftPrefix, DraftScorer, ScoringParams
from engine.draft.segments import iter_score_segments, plan_segments
from engine.ingest.document import Segment
from engine.llama.context_fit import fit_prompt
from engine.llama.prompt import PreparedPrompt, token_char_offsets
from engine.llama.runtime import TargetRuntime
from engine.llama.sampler import SamplingParams
from engine.pipeline.draft_cache import DocumentSegments
from engine.pipeline.engine_open import EngineInfo
from engine.pipeline.peak_memory import PeakMemory
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.prefix_context import PrefixContext
from engine.pipeline.request import Request, prepare_prompt
from engine.pipeline.run_policy import RunPolicy
from engine.pipeline.selection_plan import plan_request_selection, wanted_parts
from engine.pipeline.session import DocumentSession
from engine.pipeline.span_runs import spec_by_spans
from engine.pipeline.spec_finish import ChosenTokens, DraftCost, finish_spec


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


def progress_events(run: RunName, stage: Stage, steps: Steps):
    """Forward a Steps generator's (done, total) as Progress events; return its result."""
    return (yield from map_steps(steps, lambda done, total: Progress(run, stage, done, total)))


class Runner:
    """Runs one request on the main runtime (SpecPrefill, one-shot full prefills) or, in a session,
    its full prefill in the prefix context. The caller holds the target (TargetLocks.exclusive)."""

    def __init__(
        self,
        runtime: TargetRuntime,
        scorer: DraftScorer,
        info: EngineInfo,
        policy: RunPolicy,
        prefixes: PrefixCaches,
        prefix_context: PrefixContext,
    ):
        self.runtime = runtime
        self.scorer = scorer
        self.info = info
        self.policy = policy
        self.prefixes = prefixes
        self.prefix_context = prefix_context

    def run(
        self,
        run: RunName,
        text: str,
        question: str,
        settings: RunSettings,
        cancel: CancelToken,
        session: DocumentSession | None = None,
        tokenized: tuple[PreparedPrompt, float] | None = None,
        segments: tuple[Segment, ...] = (),
        enough: CancelToken = NEVER,
    ) -> Iterator[EngineEvent]:
        """One run; `tokenized` is the prompt prepared already and when its tokenizing started (TTFT counts from there)."""
        t0 = tokenized[1] if tokenized else time.perf_counter()
        yield StageChanged(run, "tokenizing")
        prompt = tokenized[0] if tokenized else prepare_prompt(self.runtime.model, text, question, settings)
        start, end = prompt.doc_token_span
        window = self.policy.window_fit(prompt.n_tokens, settings, end - start)
        cut = None
        if run == "baseline" or window.fits:  # SpecPrefill fits a longer prompt by its selection
            prompt, cut = fit_prompt(
                self.runtime.model, prompt, self.info.n_ctx, settings.max_new_tokens, settings.truncate
            )
        tokenize_s = time.perf_counter() - t0
        request = Request(run, prompt, cut, window, settings, cancel, t0, tokenize_s, segments, enough)
        if cut is not None:
            yield Notice(run, cut.describe())
        yield from (
            self.baseline(request, session=session) if run == "baseline" else self.spec(request, session)
        )

    # -- the full prefill -----------------------------------------------------------------
    def baseline(
        self, request: Request, bypass_reason: str = "", session: DocumentSession | None = None
    ) -> Iterator[EngineEvent]:
        """Full prefill and decode; in a session, in the prefix context, on top of the prefix (or
        the part a background fill did) when it holds it."""
        prompt, run = request.prompt, request.run
        runtime, start, served_by = self.runtime, 0, ""
        if session is not None:
            runtime = self.prefix_context.runtime()
            key, prefix = self.prefixes.session_prefix(session, request)
            start = self.prefixes.held(session, key, prefix, runtime)
            served_by = "cached_full" if start else "cold_full"  # a part counts too: it is not a cold prefill
            if 0 < start < len(prefix):
                yield Notice(run, f"{start} of the document's {len(prefix)} tokens were prefilled already")
            session.forget_prefix()  # until this prefill has completed the prefix again
            if not start:  # nothing in memory: a saved state, else a cold prefill (TTFT counts the load)
                start = yield from self.prefixes.load_saved(run, key, prefix, runtime)
                served_by = "saved_state" if start else "cold_full"
        positions = np.arange(start, prompt.n_tokens, dtype=np.int32)
        result = yield from self._prefill_and_generate(
            request,
            prompt.tokens[start:],
            positions,
            prompt.n_tokens,
            extend=start > 0,
            split=prompt.tail_start - start,
            runtime=runtime,
        )
        if session is not None:
            # Generation only wrote positions after the prefix: the next question removes them.
            session.remember_prefix(key, prefix, runtime.context)
        yield RunFinished(
            run,
            RunResult(
                **request.result_fields(),
                **request.full_prefill_fields(),
                positions="contiguous",
                bypassed=bool(bypass_reason),
                bypass_reason=bypass_reason,
                served_by=served_by,
                **result,
            ),
        )
        # After the answer (saving is never inside its TTFT), a prefix this run completed; not a cut
        # one: a question of another length cuts the document elsewhere, and the state would not serve it.
        if session is not None and start < len(prefix) and request.cut is None:
            problem = self.prefixes.save(key, prefix, runtime)
            if problem:
                yield Notice(run, problem)

    # -- SpecPrefill ----------------------------------------------------------------------
    def spec(self, request: Request, session: DocumentSession | None = None) -> Iterator[EngineEvent]:
        run, prompt, settings, window = request.run, request.prompt, request.settings, request.window
        reason = self.policy.bypass_reason(prompt.n_tokens, settings)
        if reason:
            yield Notice(run, f"bypassed: {reason}; ran full prefill")
            yield from self.baseline(request, bypass_reason=reason, session=session)
            return
        placement = self.policy.resolve_positions(settings.positions, window.fits)
        if placement != settings.positions and settings.positions == "restore":
            yield Notice(
                run, "restore would place tokens past the target's window: the gaps were compressed instead"
            )
        budget = self.policy.selection_budget(
            prompt, settings
        )  # before the draft: a question too long fails at once
        if self.info.draft_vocab is not None:  # another family's draft: select through character spans
            yield from spec_by_spans(self, request, placement, budget)
            return
        score, draft_s, draft_peak = yield from self._draft_scores(request, session)
        read_ahead_s = session.take_read_ahead() if session is not None else 0.0  # the first answer after it

        t_select = time.perf_counter()
        yield StageChanged(run, "select")
        offsets = token_char_offsets(self.runtime.model, prompt)  # about 0.2 s at 83K tokens
        parts, focus, definitions = self._segment_parts(request, offsets)
        plan = plan_request_selection(
            score.importance, prompt, settings, budget, parts, offsets, focus, definitions
        )
        chosen = ChosenTokens(plan, plan.kept_idx, prompt, offsets, "tokens")
        yield from finish_spec(
            self,
            request,
            chosen,
            placement,
            DraftCost(draft_s, draft_peak, t_select),
            served_by=spec_served_by(session, score.reused_prefix, read_ahead_s),
            read_ahead_s=read_ahead_s,
        )

    def _draft_scores(self, request: Request, session: DocumentSession | None):
        """The draft's scores of the prompt, with the session's cached draft keys when there are any
        (kept for the next question after); returns (scores, seconds, peak memory bytes)."""
        run, prompt, settings, window = request.run, request.prompt, request.settings, request.window
        segment_cache = self.prefixes.draft_segments(session, settings)
        pieces = plan_segments(
            prompt.n_tokens,
            prompt.doc_token_span,
            self.policy.draft_pass_tokens(settings),
            follow_ups=segment_cache is not None,
        )
        self._require_draft_memory(
            max(b - a for a, b in pieces) + prompt.n_tokens - window.document_tokens,
            ScoringParams.from_settings(settings, prompt.question_rows).question_rows,
        )
        # A full prefix only for a prompt that fits (a background fill completes it); the draft's
        # keys for any: the whole prefix when it scores the prompt in one pass, else each segment's.
        key, prefix = (None, None)
        if session is not None and window.fits:
            key, prefix = self.prefixes.session_prefix(session, request)
        elif session is not None:  # too long for a full prefill: nothing for a background fill to note
            key, prefix = self.prefixes.document_prefix(session, request)
        one_pass = len(pieces) == 1
        draft_prefix = (
            self.prefixes.draft_prefix(key, prefix, settings.draft_window) if key and one_pass else None
        )
        segments = segment_cache if not one_pass else None

        t_draft = time.perf_counter()
        tokens = prompt.tokens.tolist()
        held = segments.count_held(pieces, tokens, prompt.doc_token_span) if segments else 0
        yield StageChanged(run, "draft", draft_stage_text(prompt.n_tokens, draft_prefix, len(pieces), held))
        with PeakMemory(self.info.device) as draft_mem:
            score = yield from progress_events(
                run, "draft", self._iter_score(prompt, settings, request.cancel, draft_prefix, segments)
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
        prompt: PreparedPrompt,
        settings: RunSettings,
        cancel: CancelToken,
        draft_prefix: DraftPrefix | None,
        segments: DocumentSegments | None = None,
    ):
        """The draft's scores: one pass (with the cached prefix when there is one), or segments for a
        prompt longer than the draft was trained on (with their cached heads and slices)."""
        tokens, params = prompt.tokens.tolist(), ScoringParams.from_settings(settings, prompt.question_rows)
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

    # -- the target's prefill and the answer ------------------------------------------------
    def _prefill_and_generate(
        self,
        request: Request,
        tokens: np.ndarray,
        positions: np.ndarray,
        next_position: int,
        extend: bool = False,
        split: int = 0,
        runtime: TargetRuntime | None = None,
    ):
        """Prefill (from an empty KV cache, or with `extend` on top of what it holds; no batch crosses
        `split`), then stream the answer. Returns the timing fields of RunResult."""
        run, cancel, max_new = request.run, request.cancel, request.settings.max_new_tokens
        runtime = runtime or self.runtime
        yield StageChanged(run, "prefill", f"prefilling {len(tokens)} of {request.prompt.n_tokens} tokens")
        t_prefill = time.perf_counter()
        prefill = runtime.iter_extend if extend else runtime.iter_prefill
        logits = yield from progress_events(run, "prefill", prefill(tokens, positions, cancel, split))
        target_prefill_s = time.perf_counter() - t_prefill

        yield StageChanged(run, "generating")
        pieces: list[str] = []
        ttft_s = decode_s = 0.0
        stop_reason = "eos"
        sampling = SamplingParams.from_settings(request.settings)
        for i, piece in enumerate(
            runtime.generate(logits, next_position, max_new, cancel, sampling=sampling)
        ):
            if i == 0:
                t_first = time.perf_counter()
                ttft_s = t_first - request.t0
            pieces.append(piece.text)
            yield TokenGenerated(run, piece.text, i)
            if request.enough.cancelled:  # the reader has what it wanted (a stop sequence)
                stop_reason = "stop"
                break
        n_generated = len(pieces)
        if n_generated == 0:
            ttft_s = time.perf_counter() - request.t0  # the first token was end-of-turn
        else:
            decode_s = time.perf_counter() - t_first
        if n_generated >= max_new and stop_reason != "stop":
            stop_reason = "max_new_tokens"
        yield StageChanged(run, "done")
        return dict(
            answer="".join(pieces).strip(),
            prefill_tokens=len(tokens),
            ttft_s=ttft_s,
            decode_tok_s=(n_generated - 1) / decode_s if n_generated > 1 and decode_s > 0 else 0.0,
            generated_tokens=n_generated,
            target_prefill_s=target_prefill_s,
            stop_reason=stop_reason,
        )
