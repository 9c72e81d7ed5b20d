"""The two ways to answer one request, as events: the full prefill (baseline) and SpecPrefill
(engine.pipeline.spec_run: the draft scores, the selection keeps chunks, the target prefills only
those), then the decode; the Runner dispatches a request to one of them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.events import (
    EngineEvent,
    Notice,
    RunFinished,
    RunName,
    RunResult,
    StageChanged,
    TokenGenerated,
)
from engine.core.settings import RunSettings
from engine.draft.scorer import DraftScorer
from engine.ingest.document import Segment
from engine.llama.context_fit import fit_prompt
from engine.llama.prompt import PreparedPrompt
from engine.llama.runtime import TargetRuntime
from engine.llama.sampler import SamplingParams
from engine.pipeline.engine_open import EngineInfo
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.prefix_context import PrefixContext
from engine.pipeline.request import Request, prepare_prompt, progress_events
from engine.pipeline.run_policy import RunPolicy
from engine.pipeline.session import DocumentSession
from engine.pipeline.spec_run import SpecRun


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
        self.info = info
        self.policy = policy
        self.prefixes = prefixes
        self.prefix_context = prefix_context
        self.spec_run = SpecRun(runtime, scorer, info, policy, prefixes, self.prefill_and_generate)

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
        result = yield from self.prefill_and_generate(
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
        """SpecPrefill (SpecRun), or the full prefill when it would not pay off for this prompt."""
        reason = self.policy.bypass_reason(request.prompt.n_tokens, request.settings)
        if reason:
            yield Notice(request.run, f"bypassed: {reason}; ran full prefill")
            yield from self.baseline(request, bypass_reason=reason, session=session)
            return
        yield from self.spec_run.run(request, session)

    # -- the target's prefill and the answer ------------------------------------------------
    def prefill_and_generate(
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
