"""The engine: loaded models plus the two ways to answer, streamed as typed events.

Baseline: tokenize, full prefill in the target, greedy decode.
SpecPrefill: tokenize, the draft scores the tokens, keep the top chunks, the target
prefills only those (at their original positions in `restore` mode), greedy decode.
TTFT runs from the request's start (tokenization included) to the first token.

A prompt longer than the target's window (engine.pipeline.fitting): SpecPrefill keeps at most
what fits (the draft reads it in segments past its own window, engine.draft.segments) and
renumbers the kept tokens 0..k-1 (engine.pipeline.kept_positions); a full prefill is
refused, or cut with `truncate` (always in a compare), and says how much of the document it saw.

Engine is the facade; its parts are owned elsewhere: opening the models (engine_open), the run
decisions (run_policy), the runs themselves (runs), the prefix caches (prefix_cache,
prefix_context), the background full prefill (background_fill), the draft's read-ahead of an
opened document (read_ahead) and the locks (locking).
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.events import BackgroundEvent, EngineEvent, ReadAheadEvent, run_order
from engine.core.paths import state_cache_dir
from engine.core.settings import TIMED_QUESTION_ROWS, ModelSettings, RunSettings
from engine.core.steps import StepFn, run_to_end
from engine.draft.scorer import DraftScorer, ScoringParams
from engine.ingest.document import Document
from engine.llama.prompt import PreparedPrompt, repeated_tokens
from engine.llama.runtime import TargetRuntime
from engine.pipeline import costmodel
from engine.pipeline.background_fill import BackgroundFill
from engine.pipeline.costmodel import CostModel
from engine.pipeline.draft_cache import DraftCaches
from engine.pipeline.engine_open import (
    EngineInfo,
    LoadProgress,
    context_size,
    default_threads,
    open_models,
    warm_up,
)
from engine.pipeline.fitting import WindowFit
from engine.pipeline.locking import TargetLocks
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.prefix_context import PrefixContext
from engine.pipeline.read_ahead import ReadAhead
from engine.pipeline.request import (
    Delegated,
    close_streams,
    for_run,
    prepare_prompt,
    request_stream,
    require_question,
)
from engine.pipeline.run_policy import LONG_PROMPT_PLACEMENT, RunPolicy
from engine.pipeline.runs import Runner
from engine.pipeline.session import DocumentSession, PrefixKey
from engine.pipeline.state_store import StateStore, cap_bytes

# Importable from here as before: the CLI, the app and tests name them with the engine.
__all__ = ["Engine", "EngineInfo", "LONG_PROMPT_PLACEMENT", "LoadProgress", "context_size", "default_threads"]


class Engine:
    """Both models, loaded once; answers requests one at a time."""

    def __init__(
        self,
        runtime: TargetRuntime,
        scorer: DraftScorer,
        info: EngineInfo,
        cost_model: CostModel | None = None,
        state_store: StateStore | None = None,
        draft_caches: DraftCaches | None = None,
    ):
        self.runtime = runtime  # one-shot runs and every SpecPrefill run
        self.scorer = scorer
        self.info = info
        self._policy = RunPolicy(info, scorer, cost_model)
        self._prefixes = PrefixCaches(info, state_store, draft_caches)
        # Sessions' full prefixes live in a context of their own, opened on first use, so the
        # SpecPrefill runs in between never overwrite them.
        self._prefix_context = PrefixContext(runtime, info.target_memory_device)
        self._locks = TargetLocks()
        self._fill = BackgroundFill(self._locks, self._prefix_context, self._prefixes)
        self._read_ahead = ReadAhead(self._locks, runtime, scorer, self._policy, self._prefixes)
        self._runner = Runner(runtime, scorer, info, self._policy, self._prefixes, self._prefix_context)
        self._open_streams: weakref.WeakSet[Iterator] = weakref.WeakSet()  # closed first by close()

    # The owners hold these; they stay settable here (tests and tools swap them on a loaded engine).
    cost_model = Delegated("_policy", "From `specprefill calibrate`, when this machine has one.")
    state_store = Delegated("_prefixes", "Documents' full prefixes saved to disk (None or a cap of 0: off).")
    draft_caches = Delegated("_prefixes", "The draft's keys for documents' prefixes (None: off).")

    # -- lifetime -----------------------------------------------------------
    @classmethod
    def load(
        cls,
        settings: ModelSettings | None = None,
        progress: LoadProgress | None = None,
        cancel: CancelToken = NEVER,
    ) -> Engine:
        settings = settings or ModelSettings()
        runtime, scorer, info = open_models(settings, progress, cancel)
        caches = (
            StateStore(state_cache_dir(), cap_bytes(settings.state_cache_gb)),
            DraftCaches(cap_bytes(settings.draft_cache_gb)),
        )
        engine = cls(runtime, scorer, info, costmodel.load_matching(info), *caches)
        warm_up(runtime, scorer, info.draft_vocab)
        if progress:
            progress(3, 3, "ready")
        return engine

    def close(self) -> None:
        """Free both contexts and the models; a background fill still running is stopped first
        (its batch aborts), never left computing on freed memory. A request's event stream that was
        left suspended (its reader stopped mid-answer: a broken pipe) is closed first, which lets go
        of the target it holds."""
        self._locks.preempt_background()
        close_streams(self._open_streams)
        with self._locks.target:
            self._locks.closed = True
            self._prefix_context.close()
            self.runtime.close()

    # -- tools: tokens, timings, probes (bench, calibration and the CLI use these) ----
    def tokenize(self, text: str) -> list[int]:
        """The text's tokens; special-token text in it stays plain text."""
        return self.runtime.model.tokenize(text, parse_special=False)

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self.runtime.model.token_piece(t) for t in tokens).decode("utf-8", "replace")

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def sample_tokens(self, text: str, n_tokens: int, what: str = "sample") -> list[int]:
        """The first n_tokens of the text's tokens, the text repeating when it is shorter."""
        return repeated_tokens(self.runtime.model, text, n_tokens, what)

    def time_prefill(
        self, tokens: list[int], cancel: CancelToken = NEVER, on_step: StepFn | None = None
    ) -> float:
        """Seconds for a full target prefill of `tokens` at positions 0..n-1 (on_step: each batch's progress)."""
        ids = np.asarray(tokens, dtype=np.int32)
        with self._locks.exclusive():  # a background fill must not share the cores with a timing
            start = time.perf_counter()
            run_to_end(self.runtime.iter_prefill(ids, np.arange(len(ids), dtype=np.int32), cancel), on_step)
            return time.perf_counter() - start

    def time_draft(
        self,
        tokens: list[int],
        settings: RunSettings | None = None,
        cancel: CancelToken = NEVER,
        on_step: StepFn | None = None,
    ) -> float:
        """Seconds for one draft scoring pass over `tokens` (look-ahead, kernel and window from settings),
        with the last TIMED_QUESTION_ROWS tokens' rows recorded when settings.score_question (a question's cost)."""
        settings = settings or RunSettings()
        params = ScoringParams.from_settings(settings, TIMED_QUESTION_ROWS)
        with self._locks.exclusive():
            start = time.perf_counter()
            run_to_end(self.scorer.iter_score(list(tokens), params, cancel), on_step)
            return time.perf_counter() - start

    def prepare(self, document_text: str, question: str, settings: RunSettings) -> PreparedPrompt:
        return prepare_prompt(self.runtime.model, document_text, question, settings)

    # -- what a run would do (engine.pipeline.run_policy) ---------------------------
    def estimate(self, n_tokens: int, settings: RunSettings) -> dict | None:
        """Predicted TTFTs from this machine's calibration, or None when not calibrated."""
        return self._policy.estimate(n_tokens, settings)

    def bypass_reason(self, n_tokens: int, settings: RunSettings) -> str:
        """Why SpecPrefill would not pay off for this prompt ("" when it runs)."""
        return self._policy.bypass_reason(n_tokens, settings)

    def window_fit(
        self, n_tokens: int, settings: RunSettings, document_tokens: int | None = None
    ) -> WindowFit:
        """A prompt of n_tokens against the target's window (document_tokens: n_tokens when unknown)."""
        return self._policy.window_fit(n_tokens, settings, document_tokens)

    def resolve_positions(self, requested: str, fits: bool = True) -> str:
        """The placement that runs for the requested positions mode."""
        return self._policy.resolve_positions(requested, fits)

    def draft_pass_tokens(self, settings: RunSettings) -> int:
        """The longest prompt one draft pass scores: its trained window less the look-ahead."""
        return self._policy.draft_pass_tokens(settings)

    def selection_budget(self, prompt: PreparedPrompt, settings: RunSettings) -> int | None:
        """Tokens the kept chunks may hold: None when the whole prompt fits the window."""
        return self._policy.selection_budget(prompt, settings)

    # -- requests -------------------------------------------------------------
    @request_stream
    def stream(
        self,
        document: Document | str,
        question: str,
        mode: str = "both",
        settings: RunSettings | None = None,
        cancel: CancelToken = NEVER,
        spec_first: bool = False,
    ) -> Iterator[EngineEvent]:
        """Events for the baseline and/or SpecPrefill run; in `both` mode baseline first, or
        SpecPrefill first with `spec_first` (the app: the fast answer shows first). The order
        does not favour either run: the models were warmed up at load (engine_open.warm_up).

        One stream at a time: a second one started while another is active is refused
        (EngineBusyError), never run alongside it.
        """
        settings = settings or RunSettings()
        text = document.text if isinstance(document, Document) else document
        segments = tuple(document.segments) if isinstance(document, Document) else ()
        self._check_request(question, settings)
        runs = run_order(mode, spec_first)
        with self._locks.exclusive():
            for run in runs:
                yield from self._runner.run(
                    run,
                    text,
                    question,
                    for_run(run, settings, compare=len(runs) > 1),
                    cancel,
                    segments=segments,
                )

    @request_stream
    def ask(
        self,
        session: DocumentSession,
        question: str,
        mode: str = "auto",
        settings: RunSettings | None = None,
        cancel: CancelToken = NEVER,
        enough: CancelToken = NEVER,
    ) -> Iterator[EngineEvent]:
        """Events for one question about the session's document (modes: engine.pipeline.session).

        A full prefill leaves the document's prefix in the target's KV cache; the session's next
        full-prefix run prefills only its own tail on top of it. Each RunResult says how its
        prefill was served (`served_by`). One run at a time, as `stream`. `enough`, set while the
        answer streams (a stop sequence seen), ends it after the token just handed out, with its
        result (stop_reason "stop"); `cancel` ends it without one.
        """
        settings = settings or RunSettings()
        self._check_request(question, settings)
        with self._locks.exclusive():
            key = self._prefix_key(session, settings)
            t0 = time.perf_counter()
            prompt = self.prepare(session.text, question, settings)  # tokenized once: the run reuses it
            run = session.run_for(
                mode,
                saved=self._prefixes.has_saved(key),
                cached=session.holds_full(key),
                background=settings.background_prefill,
                fits=self.window_fit(prompt.n_tokens, settings).fits,
            )
            yield from self._runner.run(
                run,
                session.text,
                question,
                settings,
                cancel,
                session,
                tokenized=(prompt, t0),
                segments=session.segments,
                enough=enough,
            )
            session.answered += 1

    @request_stream
    def ask_both(
        self,
        session: DocumentSession,
        question: str,
        settings: RunSettings | None = None,
        cancel: CancelToken = NEVER,
        spec_first: bool = True,
    ) -> Iterator[EngineEvent]:
        """Events for the side-by-side compare of one question: SpecPrefill (the draft's cached
        prefix when it has one) and the full prefix (cached when held: on a follow-up the compare
        is the cached full document against SpecPrefill, as each RunResult's served_by says)."""
        settings = settings or RunSettings()
        self._check_request(question, settings)
        with self._locks.exclusive():
            for run in run_order("both", spec_first):
                yield from self._runner.run(
                    run,
                    session.text,
                    question,
                    for_run(run, settings, compare=True),
                    cancel,
                    session,
                    segments=session.segments,
                )
            session.answered += 1

    def forget(self, session: DocumentSession, saved: bool = False, draft: bool = True) -> None:
        """Drop what the engine keeps for the session's document: its full prefix in the target and
        a background fill's progress; the draft's keys unless `draft` is False; with `saved`, its
        saved states on disk too."""
        with self._locks.exclusive():
            if session.filled_tokens:
                self._prefix_context.clear()  # its memory is reused by the next document
            session.forget_prefix()
            session.last_prefix = None
            self._prefixes.forget(session, saved=saved, draft=draft)

    def _check_request(self, question: str, settings: RunSettings) -> None:
        """Refuse a request before any of its runs starts."""
        require_question(question)
        self.scorer.check_first_layer(settings.first_scored_layer)

    def _prefix_key(self, session: DocumentSession, settings: RunSettings) -> PrefixKey:  # tests read it
        return self._prefixes.key(session, settings)

    # -- the background full prefill (engine.pipeline.background_fill) ----------------
    def background_needed(self, session: DocumentSession, settings: RunSettings | None = None) -> bool:
        """Whether a background fill has work: the setting is on, a question was asked (or the draft read
        ahead), and the document's full prefix is neither in the prefix context nor saved."""
        return self._fill.needed(session, settings)

    def background_prefill(
        self, session: DocumentSession, settings: RunSettings | None = None, cancel: CancelToken = NEVER
    ) -> Iterator[BackgroundEvent]:
        """Prefill the session's full document prefix into the prefix context, one batch at a time,
        while nothing else runs: the latest question's prefix, after a SpecPrefill answer.

        A request (ask, ask_both, stream...) takes the target at once: the batch under way aborts
        and this ends `paused`; the next call resumes after the last finished batch. Finished,
        the prefix is saved (as after a cold full prefill) and follow-ups are served from it.
        Ends with exactly one BackgroundEnded."""
        return self._fill.run(session, settings, cancel)

    def read_ahead(
        self, session: DocumentSession, settings: RunSettings | None = None, cancel: CancelToken = NEVER
    ) -> Iterator[ReadAheadEvent]:
        """The draft reads the session's document into its cache before the first question, chunk by
        chunk while nothing else runs (a request preempts it and drafts the rest); run it before
        background_prefill, whose prefix it notes. Ends with exactly one ReadAheadEnded."""
        return self._read_ahead.run(session, settings, cancel)

    def open_prefix_context(self) -> None:
        """Open the sessions' prefix context now, not at its first use (the session bench times it)."""
        with self._locks.exclusive():
            self._prefix_context.runtime()

    def _prefix_runtime(self) -> TargetRuntime:  # the sessions' full prefixes' context, opened on first use
        return self._prefix_context.runtime()
