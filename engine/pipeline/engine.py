"""The engine: loaded models plus the two ways to answer, streamed as typed events.

Baseline: tokenize, full prefill in the target, greedy decode.
SpecPrefill: tokenize, the draft scores the tokens, keep the top chunks, the target
prefills only those (at their original positions in `restore` mode), greedy decode.
TTFT runs from the request's start (tokenization included) to the first token.

A prompt longer than the target's window (engine.pipeline.fitting): SpecPrefill keeps at most
what fits (the draft reads it in segments past its own window, engine.draft.segments) and
renumbers the kept tokens 0..k-1 (engine.pipeline.kept_positions); a full prefill is
refused, or cut with `truncate` (always in a compare), and says how much of the document it saw.
"""

from __future__ import annotations

import logging
import os
import functools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import psutil
import torch

from engine.core.cancel import NEVER, AnyCancel, CancelToken
from engine.core.endpoints import parse_split
from engine.core.errors import (Cancelled, ContextOverflowError, EngineBusyError, ModelError,
                                PositionsUnsupportedError, SettingsError, SpecPrefillError)
from engine.core.events import (BackgroundEnded, BackgroundEvent, BackgroundProgress, EngineEvent, Notice, Progress,
                                RunFinished, RunName, RunResult, Selection, SelectionMade, Stage, StageChanged,
                                TokenGenerated, run_order)
from engine.core.formatting import format_bytes
from engine.core.memory import needs_by_device, require_all_fit, require_fits
from engine.core.paths import state_cache_dir
from engine.core.settings import (DEFAULT_MIN_TOKENS, MAX_CONTEXT_DEFAULT, TIMED_QUESTION_ROWS, ModelSettings, RunSettings,
                                  nominal_keep)
from engine.core.steps import StepFn, Steps, chunk_ranges, map_steps, run_to_end
from engine.draft.loader import DraftDevice, draft_eos_ids, load_draft_model, pick_device
from engine.draft.memory import draft_scoring_need, draft_weight_bytes
from engine.draft.scorer import ATTN_IMPL, DraftPrefix, DraftScorer, ScoringParams
from engine.draft.segments import iter_score_segments, plan_segments
from engine.ingest.document import Document, Segment
from engine.llama.context_fit import Truncation, fit_prompt
from engine.llama.memory import load_needs, target_kv_shape
from engine.llama.native import LlamaContext, LlamaModel, build_info, cpu_path
from engine.llama.prompt import (PreparedPrompt, render_parts, repeated_tokens, token_char_offsets,
                                 tokenize_parts)
from engine.llama.rpc.host import HostInfo, HostSpec
from engine.llama.rpc.proxies import RemoteContext, open_remote_target
from engine.llama.runtime import TargetRuntime
from engine.models import defaults as models
from engine.pipeline import costmodel
from engine.pipeline.costmodel import CostModel
from engine.pipeline.draft_cache import DocumentSegments, DraftCaches
from engine.pipeline.fitting import WindowFit, seen_fraction
from engine.pipeline.kept_positions import GAPPED, place_kept
from engine.pipeline.peak_memory import PeakMemory, held_bytes
from engine.pipeline.placement import TargetPlacement, place_target
from engine.pipeline.selection_plan import focus_notice, plan_request_selection, wanted_parts
from engine.pipeline.session import DocumentSession, PrefixKey
from engine.pipeline.state_store import STORE_ERRORS, StateLoad, StateStore, cap_bytes
from engine.pipeline.vocab_check import require_shared_vocab

log = logging.getLogger(__name__)
LoadProgress = Callable[[int, int, str], None]


def _request_stream(method):
    """Register a request's event generator with its engine, so that close() can close it."""
    @functools.wraps(method)
    def start(self, *args, **kwargs):
        events = method(self, *args, **kwargs)
        self._open_streams.add(events)
        return events
    return start


@dataclass(frozen=True)
class EngineInfo:
    target_name: str
    draft_name: str
    target_path: Path
    draft_path: Path
    positions_supported: bool  # the runtime accepts gapped positions: `restore` is available
    device: str  # the draft's torch device: "cpu", "cuda", "mps"
    draft_memory_bytes: int
    n_ctx: int
    target_device: str = "CPU"  # where the target runs: "CPU" or "GPU (all layers, CUDA)"
    target_offload_reason: str = ""  # why the target stays on the CPU; "" when it is offloaded
    target_memory_device: str = "cpu"  # whose memory the target's KV caches take: "cpu" or "cuda"
    flash_attn: str = "auto"  # the target context's flash attention: "on", "off", or "auto" (llama.cpp's pick)
    target_backends: tuple[str, ...] = ("CPU",)  # where the target's layers run: "CPU", "CUDA", "RPC HOST:PORT"
    draft_trained_window: int = 0  # the positions the draft was trained on (0: not known)
    cpu_path: str = ""  # llama.cpp's CPU variant, extra buffers and self-test (engine.llama.cpu_backend)


def default_threads() -> int:
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def _resolve_paths(settings: ModelSettings) -> tuple[Path, Path]:
    """The model files. Defaults must be assembled and verified already: a run never downloads."""
    target = Path(settings.target_path) if settings.target_path else models.require_verified(models.TARGET)
    draft = Path(settings.draft_path) if settings.draft_path else models.require_verified(models.DRAFT)
    for role, path in (("target", target), ("draft", draft)):
        if not path.exists():
            raise ModelError(f"{role} model not found: {path}")
    return target, draft


def context_size(requested: int | None, trained: int, target_name: str) -> int:
    """The context window to open: what was asked for, within what the target was trained on."""
    if requested is None:
        return min(trained, MAX_CONTEXT_DEFAULT)
    if requested > trained:
        raise SettingsError(f"context size {requested} is more than {target_name} was trained for ({trained} tokens)")
    return requested


def _display_name(path: Path, spec: models.ModelSpec) -> str:
    return spec.name if path == spec.path else path.name


RPC_LOCAL_CPU = "its layers are split with RPC workers; this machine's share runs on its CPU"


def _place_target(device: DraftDevice, workers: bool) -> TargetPlacement:
    flags, gpu_offload = build_info()
    placement = TargetPlacement(0, "cpu", reason=RPC_LOCAL_CPU) if workers else \
        place_target(str(device.device), gpu_offload, flags)
    log.info("draft on %s, target on %s", device.device, placement.describe())
    return placement


def _open_target(settings: ModelSettings, target_path: Path, target_name: str, draft_path: Path,
                 draft_name: str, device: DraftDevice, placement: TargetPlacement, threads: int) -> TargetRuntime:
    """The target and its context, created once the vocabularies match and the memory suffices.

    The checks read the target opened on the CPU (mapped, nothing copied yet); only then is it
    opened again with its layers on the GPU, so a GPU too small is refused with the figures
    before llama.cpp fails to allocate there."""
    target = LlamaModel(target_path)
    try:
        require_shared_vocab(target, target_name, draft_path, draft_name)
        n_ctx = context_size(settings.n_ctx, target.n_ctx_train(), target_name)
        draft_weights = draft_weight_bytes(draft_path, device.dtype.itemsize)
        require_all_fit(load_needs(target, n_ctx, placement.memory_device, draft_weights, str(device.device),
                                   local_weights=not settings.workers))
        flash_attn = placement.flash_attn(settings.flash_attn)
        if settings.workers:
            n_layers = target.attention_dims()[0]
            target.close()
            return _open_remote_target(settings, target_path, n_layers, n_ctx, threads, flash_attn)
        if placement.offloaded:
            target.close()
            target = LlamaModel(target_path, n_gpu_layers=placement.n_gpu_layers)
        return TargetRuntime(target, LlamaContext(target, n_ctx=n_ctx, n_batch=settings.n_batch, n_threads=threads,
                                                  flash_attn=flash_attn))
    except BaseException:
        target.close()  # free the native memory now, not at garbage collection
        raise


def _open_remote_target(settings: ModelSettings, target_path: Path, n_layers: int, n_ctx: int, threads: int,
                        flash_attn: str) -> TargetRuntime:
    """The target in a host process, its layers split between this machine and the RPC workers."""
    workers = settings.workers
    spec = HostSpec(target_path, n_layers, tuple(map(str, workers)), parse_split(settings.rpc_split, len(workers)))
    model = open_remote_target(spec, workers, settings.rpc_timeout)
    try:
        return TargetRuntime(model, RemoteContext(model, n_ctx=n_ctx, n_batch=settings.n_batch, n_threads=threads,
                                                  flash_attn=flash_attn))
    except BaseException:
        model.close()
        raise


def _host_info(runtime: TargetRuntime) -> HostInfo | None:
    """What the host process reports of a target over RPC workers; None for an in-process target."""
    host = getattr(runtime.model, "host", None)
    return host.info if host is not None else None


def _target_backends(runtime: TargetRuntime, placement: TargetPlacement) -> tuple[str, ...]:
    info = _host_info(runtime)
    return info.backends if info is not None else (placement.backend or "CPU",)


def _target_where(runtime: TargetRuntime, placement: TargetPlacement) -> str:
    """"CPU", "GPU (all layers, CUDA)", or "CPU 10 layers + 2 RPC workers 9+9"."""
    info = _host_info(runtime)
    if info is None:
        return placement.where
    split = info.split
    workers = "+".join(map(str, split.worker_layers))
    return f"CPU {split.local_layers} layers + {len(split.worker_layers)} RPC workers {workers}"


WARM_UP_TOKENS = 16
# Where kept tokens go when the prompt is longer than the window (auto positions): packed 0..k-1.
# At 48K it answered 5 of 5 needles where compressed gaps answered 4 (README, Long documents).
LONG_PROMPT_PLACEMENT = "renumber"


def _require_question(question: str) -> None:
    if not question.strip():
        raise ValueError("the question is empty")


@dataclass(frozen=True)
class _Request:
    """One run: its prompt (cut to the context when a full prefill needs it), settings, the whole
    prompt against the window, and when it started."""

    run: RunName
    prompt: PreparedPrompt
    cut: Truncation | None
    window: WindowFit  # the prompt before any cut
    settings: RunSettings
    cancel: CancelToken
    t0: float
    tokenize_s: float
    segments: tuple[Segment, ...] = ()  # the document's pages, sections or files, for coverage

    def result_fields(self) -> dict:
        """The RunResult fields every run of this request shares."""
        cut = self.cut or Truncation(0, 0, 0, 0)
        return dict(run=self.run, prompt_tokens=self.prompt.n_tokens, tokenize_s=self.tokenize_s,
                    truncated_tokens=cut.cut_tokens, truncated_chars=cut.cut_chars,
                    document_tokens=self.window.document_tokens)

    def full_prefill_fields(self) -> dict:
        """How much of the document a full prefill of this request's prompt saw."""
        doc = self.window.document_tokens
        cut = self.cut.cut_tokens if self.cut else 0
        return dict(fit="truncated" if cut else "fits", seen_fraction=seen_fraction(doc, doc - cut))


def _tensor_bytes(model) -> int:
    """Bytes of the parameters and buffers torch can see (int8-packed Linear weights are not among them)."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _for_run(run: RunName, settings: RunSettings, compare: bool) -> RunSettings:
    """A compare's full prefill is what a user gets without SpecPrefill: a document longer than the
    window is cut to fit (and labelled truncated), not refused."""
    if compare and run == "baseline" and not settings.truncate:
        return replace(settings, truncate=True)
    return settings


def _draft_stage_text(n_tokens: int, draft_prefix: DraftPrefix | None, n_segments: int, held: int = 0) -> str:
    if draft_prefix is not None and draft_prefix.cache is not None:
        return f"draft scoring {n_tokens - len(draft_prefix)} tokens (the document from the draft cache)"
    if n_segments > 1:
        cached = f"; {held} of them from the draft cache" if held else ""
        return f"draft scoring {n_tokens} tokens in {n_segments} segments (longer than the draft's window{cached})"
    return f"draft scoring {n_tokens} tokens"


def _spec_served_by(session: DocumentSession | None, reused_prefix: int) -> str:
    if session is None:
        return ""  # one-shot runs say nothing of caches
    return "spec_cached_draft" if reused_prefix else "spec"


class Engine:
    """Both models, loaded once; answers requests one at a time."""

    def __init__(self, runtime: TargetRuntime, scorer: DraftScorer, info: EngineInfo,
                 cost_model: CostModel | None = None, state_store: StateStore | None = None,
                 draft_caches: DraftCaches | None = None):
        self.runtime = runtime  # one-shot runs and every SpecPrefill run
        self.scorer = scorer
        self.info = info
        self.cost_model = cost_model  # from `specprefill calibrate`, when this machine has one
        # Documents' full prefixes saved to disk, for sessions (None or a cap of 0: off)
        self.state_store = state_store
        # The draft's keys for documents' prefixes, for follow-up SpecPrefill runs (None: off)
        self.draft_caches = draft_caches
        # Sessions' full prefixes live in a context of their own, opened on first use, so the
        # SpecPrefill runs in between never overwrite them.
        self._prefix_rt: TargetRuntime | None = None
        self._foreground = threading.Lock()  # held while a request runs: one at a time
        self._target = threading.Lock()  # held while the target computes (a request, or one background batch)
        self._preempt_guard = threading.Lock()
        self._preempt: CancelToken | None = None  # the running background fill's "a request needs the target"
        self._open_streams: weakref.WeakSet[Iterator] = weakref.WeakSet()  # closed first by close()
        self._closed = False

    # -- lifetime -----------------------------------------------------------
    @classmethod
    def load(cls, settings: ModelSettings | None = None, progress: LoadProgress | None = None,
             cancel: CancelToken = NEVER) -> Engine:
        settings = settings or ModelSettings()
        target_path, draft_path = _resolve_paths(settings)
        threads = settings.n_threads or default_threads()
        torch.set_num_threads(threads)
        device = pick_device(settings.device)
        placement = _place_target(device, bool(settings.workers))
        target_name = _display_name(target_path, models.TARGET)
        draft_name = _display_name(draft_path, models.DRAFT)

        if progress:
            progress(0, 3, f"loading target {target_name}")
        runtime = _open_target(settings, target_path, target_name, draft_path, draft_name, device, placement,
                               threads)
        try:
            cancel.raise_if_cancelled()
            if progress:
                progress(1, 3, f"loading draft {draft_name}")
            before = held_bytes(device.device)
            draft = load_draft_model(draft_path, device, ATTN_IMPL, settings.draft_quant)
            # RSS growth is noisy (the allocator may reuse freed pages): never report less
            # than the tensors the draft plainly holds.
            draft_weights = max(held_bytes(device.device) - before, _tensor_bytes(draft))
            cancel.raise_if_cancelled()
            scorer = DraftScorer(draft, draft_eos_ids(draft))
            if progress:
                progress(2, 3, "probing position support")
            info = EngineInfo(target_name=target_name, draft_name=draft_name, target_path=target_path,
                              draft_path=draft_path, positions_supported=runtime.accepts_gapped_positions(),
                              device=str(device.device),
                              draft_memory_bytes=draft_weights,
                              n_ctx=runtime.context.n_ctx,
                              target_device=_target_where(runtime, placement),
                              target_offload_reason=placement.reason,
                              target_memory_device=placement.memory_device,
                              flash_attn=runtime.context.flash_attn,
                              target_backends=_target_backends(runtime, placement),
                              draft_trained_window=scorer.trained_window,
                              cpu_path=cpu_path().summary())
        except BaseException:
            runtime.close()  # free the target's native memory now, not at garbage collection
            raise
        engine = cls(runtime, scorer, info, costmodel.load_matching(info),
                     StateStore(state_cache_dir(), cap_bytes(settings.state_cache_gb)),
                     DraftCaches(cap_bytes(settings.draft_cache_gb)))
        engine._warm_up()
        if progress:
            progress(3, 3, "ready")
        return engine

    def close(self) -> None:
        """Free both contexts and the models; a background fill still running is stopped first
        (its batch aborts), never left computing on freed memory. A request's event stream that was
        left suspended (its reader stopped mid-answer: a broken pipe) is closed first, which lets go
        of the target it holds."""
        self._preempt_background()
        self._close_open_streams()
        with self._target:
            self._closed = True
            if self._prefix_rt is not None:
                self._prefix_rt.close()
            self.runtime.close()

    def _close_open_streams(self) -> None:
        for events in list(self._open_streams):
            try:
                events.close()
            except ValueError:  # running on another thread: its Cancel ends it, then close() goes on
                pass

    def _warm_up(self) -> None:
        """One tiny pass through each model, so the first run of a session pays no first-touch costs
        (the target's weights are mapped pages read on first use): whichever run comes first, both
        start from the same warm state."""
        tokens = self.sample_tokens("warm up", WARM_UP_TOKENS, "warm-up")
        self.runtime.prefill(np.asarray(tokens, dtype=np.int32), np.arange(len(tokens), dtype=np.int32))
        self.runtime.context.clear()
        self.scorer.score(tokens, ScoringParams(lookahead=1, kernel=1))

    # -- tools: tokens, timings, probes (bench, calibration and the CLI use these) ----
    def tokenize(self, text: str) -> list[int]:
        """The text's tokens; special-token text in it stays plain text."""
        return self.runtime.model.tokenize(text, parse_special=False)

    def detokenize(self, tokens: list[int]) -> str:
        model = self.runtime.model
        return b"".join(model.token_piece(t) for t in tokens).decode("utf-8", "replace")

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def sample_tokens(self, text: str, n_tokens: int, what: str = "sample") -> list[int]:
        """The first n_tokens of the text's tokens, the text repeating when it is shorter."""
        return repeated_tokens(self.runtime.model, text, n_tokens, what)

    def time_prefill(self, tokens: list[int], cancel: CancelToken = NEVER, on_step: StepFn | None = None) -> float:
        """Seconds for a full target prefill of `tokens` at positions 0..n-1 (on_step: each batch's progress)."""
        ids = np.asarray(tokens, dtype=np.int32)
        with self._exclusive():  # a background fill must not share the cores with a timing
            start = time.perf_counter()
            run_to_end(self.runtime.iter_prefill(ids, np.arange(len(ids), dtype=np.int32), cancel), on_step)
            return time.perf_counter() - start

    def time_draft(self, tokens: list[int], settings: RunSettings | None = None,
                   cancel: CancelToken = NEVER, on_step: StepFn | None = None) -> float:
        """Seconds for one draft scoring pass over `tokens` (look-ahead, kernel and window from settings),
        with the last TIMED_QUESTION_ROWS tokens' rows recorded when settings.score_question (a question's cost)."""
        settings = settings or RunSettings()
        params = ScoringParams.from_settings(settings, TIMED_QUESTION_ROWS)
        with self._exclusive():
            start = time.perf_counter()
            run_to_end(self.scorer.iter_score(list(tokens), params, cancel), on_step)
            return time.perf_counter() - start

    def probe_positions(self) -> bool:
        """Probe the runtime again: does it accept gapped positions (`restore`)?"""
        return self.runtime.accepts_gapped_positions()

    def prepare(self, document_text: str, question: str, settings: RunSettings) -> PreparedPrompt:
        parts = render_parts(self.runtime.model, document_text, question, settings.system_prompt)
        return tokenize_parts(self.runtime.model, parts)

    def estimate(self, n_tokens: int, settings: RunSettings) -> dict | None:
        """Predicted TTFTs from this machine's calibration, or None when not calibrated."""
        if self.cost_model is None:
            return None
        return self.cost_model.estimate(n_tokens, nominal_keep(settings.keep), settings.draft_window,
                                        self.window_fit(n_tokens, settings).budget, self.draft_pass_tokens(settings))

    def bypass_reason(self, n_tokens: int, settings: RunSettings) -> str:
        """Why SpecPrefill would not pay off for this prompt ("" when it runs).

        A threshold the user set wins; otherwise the calibrated cost model decides, and
        without a calibration the fixed DEFAULT_MIN_TOKENS does. A prompt longer than the
        window is never bypassed: SpecPrefill's selection is what makes it fit.
        """
        if settings.force or not self.window_fit(n_tokens, settings).fits:
            return ""
        if settings.min_tokens is None and self.cost_model is not None:
            return self.cost_model.bypass_reason(n_tokens, nominal_keep(settings.keep), settings.draft_window)
        threshold = settings.min_tokens if settings.min_tokens is not None else DEFAULT_MIN_TOKENS
        if n_tokens >= threshold:
            return ""
        return f"{n_tokens} tokens is below the SpecPrefill threshold of {threshold}"

    def window_fit(self, n_tokens: int, settings: RunSettings, document_tokens: int | None = None) -> WindowFit:
        """A prompt of n_tokens against the target's window (document_tokens: n_tokens when unknown)."""
        doc = n_tokens if document_tokens is None else document_tokens
        return WindowFit(n_tokens, doc, self.info.n_ctx, settings.max_new_tokens)

    def resolve_positions(self, requested: str, fits: bool = True) -> str:
        """The placement that runs: auto is restore, or renumber for a prompt longer than the window
        (restore would reach past the target's trained positions) or on a runtime that rejects
        gapped positions. A requested restore on such a prompt compresses instead (the gapped
        placement nearest to it)."""
        supported = self.info.positions_supported
        if requested == "auto":
            if not supported:
                return "renumber"
            return "restore" if fits else LONG_PROMPT_PLACEMENT
        if requested in GAPPED and not supported:
            raise PositionsUnsupportedError("this llama.cpp build rejects gapped positions, "
                                            f"so `{requested}` is unavailable")
        if requested == "restore" and not fits:
            return "compress"
        return requested

    # -- requests -------------------------------------------------------------
    @_request_stream
    def stream(self, document: Document | str, question: str, mode: str = "both",
               settings: RunSettings | None = None, cancel: CancelToken = NEVER,
               spec_first: bool = False) -> Iterator[EngineEvent]:
        """Events for the baseline and/or SpecPrefill run; in `both` mode baseline first, or
        SpecPrefill first with `spec_first` (the app: the fast answer shows first). The order
        does not favour either run: the models were warmed up at load (`_warm_up`).

        One stream at a time: a second one started while another is active is refused
        (EngineBusyError), never run alongside it.
        """
        settings = settings or RunSettings()
        text = document.text if isinstance(document, Document) else document
        segments = tuple(document.segments) if isinstance(document, Document) else ()
        self._check_request(question, settings)
        runs = run_order(mode, spec_first)
        with self._exclusive():
            for run in runs:
                yield from self._run(run, text, question, _for_run(run, settings, compare=len(runs) > 1), cancel,
                                     segments=segments)

    @_request_stream
    def ask(self, session: DocumentSession, question: str, mode: str = "auto",
            settings: RunSettings | None = None, cancel: CancelToken = NEVER) -> Iterator[EngineEvent]:
        """Events for one question about the session's document (modes: engine.pipeline.session).

        A full prefill leaves the document's prefix in the target's KV cache; the session's next
        full-prefix run prefills only its own tail on top of it. Each RunResult says how its
        prefill was served (`served_by`). One run at a time, as `stream`.
        """
        settings = settings or RunSettings()
        self._check_request(question, settings)
        with self._exclusive():
            key = self._prefix_key(session, settings)
            t0 = time.perf_counter()
            prompt = self.prepare(session.text, question, settings)  # tokenized once: the run reuses it
            run = session.run_for(mode, saved=self._has_saved_prefix(key), cached=session.holds_full(key),
                                  background=settings.background_prefill,
                                  fits=self.window_fit(prompt.n_tokens, settings).fits)
            yield from self._run(run, session.text, question, settings, cancel, session, tokenized=(prompt, t0),
                                 segments=session.segments)
            session.answered += 1

    @_request_stream
    def ask_both(self, session: DocumentSession, question: str, settings: RunSettings | None = None,
                 cancel: CancelToken = NEVER, spec_first: bool = True) -> Iterator[EngineEvent]:
        """Events for the side-by-side compare of one question: SpecPrefill (the draft's cached
        prefix when it has one) and the full prefix (cached when held: on a follow-up the compare
        is the cached full document against SpecPrefill, as each RunResult's served_by says)."""
        settings = settings or RunSettings()
        self._check_request(question, settings)
        with self._exclusive():
            for run in run_order("both", spec_first):
                yield from self._run(run, session.text, question, _for_run(run, settings, compare=True), cancel,
                                     session, segments=session.segments)
            session.answered += 1

    def forget(self, session: DocumentSession, saved: bool = False, draft: bool = True) -> None:
        """Drop what the engine keeps for the session's document: its full prefix in the target and
        a background fill's progress; the draft's keys unless `draft` is False; with `saved`, its
        saved states on disk too."""
        with self._exclusive():
            if self._prefix_rt is not None and session.filled_tokens:
                self._prefix_rt.context.clear()  # its memory is reused by the next document
            session.forget_prefix()
            session.last_prefix = None
            if draft and self.draft_caches is not None:
                self.draft_caches.drop(session.document_sha256)
            if saved and self.state_store is not None:
                self.state_store.clear(session.document_sha256)

    def _check_request(self, question: str, settings: RunSettings) -> None:
        """Refuse a request before any of its runs starts."""
        _require_question(question)
        self.scorer.check_first_layer(settings.first_scored_layer)

    @contextmanager
    def _exclusive(self):
        """One request at a time; a background fill gives the target up at once (its current
        llama.cpp batch aborts, and the next call resumes from the batch before)."""
        if not self._foreground.acquire(blocking=False):
            raise EngineBusyError("a run is already in progress on this engine; wait for it or cancel it")
        try:
            self._preempt_background()
            with self._target:
                yield
        finally:
            self._foreground.release()

    def _preempt_background(self) -> None:
        with self._preempt_guard:
            if self._preempt is not None:
                self._preempt.cancel()

    # -- the background full prefill ------------------------------------------------
    def background_needed(self, session: DocumentSession, settings: RunSettings | None = None) -> bool:
        """Whether a background fill has work: the setting is on, a question was asked, and the
        document's full prefix is neither in the prefix context nor saved."""
        settings = settings or RunSettings()
        if not settings.background_prefill or session.last_prefix is None:
            return False
        key = session.last_prefix[0]
        return (key == self._prefix_key(session, settings) and not session.holds_full(key)
                and not self._has_saved_prefix(key))

    def background_prefill(self, session: DocumentSession, settings: RunSettings | None = None,
                           cancel: CancelToken = NEVER) -> Iterator[BackgroundEvent]:
        """Prefill the session's full document prefix into the prefix context, one batch at a time,
        while nothing else runs: the latest question's prefix, after a SpecPrefill answer.

        A request (ask, ask_both, stream...) takes the target at once: the batch under way aborts
        and this ends `paused`; the next call resumes after the last finished batch. Finished,
        the prefix is saved (as after a cold full prefill) and follow-ups are served from it.
        Ends with exactly one BackgroundEnded."""
        settings = settings or RunSettings()
        if not self.background_needed(session, settings):
            held = session.full_prefix_tokens
            yield BackgroundEnded("not_needed", held, held, 0.0)
            return
        key, prefix = session.last_prefix
        preempt = CancelToken()
        with self._preempt_guard:
            self._preempt = preempt
        t0 = time.perf_counter()
        try:
            token = AnyCancel(cancel, preempt)
            done = session.filled_tokens
            while done < len(prefix):
                step = self._fill_step(session, key, prefix, token)
                if step is None:
                    break
                done = step
                yield BackgroundProgress(done, len(prefix))
        except Cancelled:
            pass
        except (SpecPrefillError, MemoryError) as error:
            session.forget_prefix()
            yield BackgroundEnded("failed", 0, len(prefix), time.perf_counter() - t0, str(error))
            return
        finally:
            with self._preempt_guard:
                if self._preempt is preempt:
                    self._preempt = None
        yield from self._end_fill(session, key, prefix, cancel, time.perf_counter() - t0)

    def _fill_step(self, session: DocumentSession, key: PrefixKey, prefix: np.ndarray,
                   token: CancelToken) -> int | None:
        """Prefill the prefix's next batch; the tokens held after it, or None when a request has
        (or has asked for) the target. The batches are a full prefill's, so the result is the
        prefix a cold full prefill leaves."""
        if token.cancelled or not self._target.acquire(blocking=False):
            return None
        try:
            if token.cancelled or self._foreground.locked() or self._closed:  # a request came between the checks
                return None
            runtime = self._prefix_runtime()
            held = session.held_tokens(key, prefix, runtime.context)
            if not held or not runtime.context.remove_after(held):
                held = 0
                runtime.context.clear()
            start, end = chunk_ranges(held, len(prefix), runtime.context.n_batch)[0]
            run_to_end(runtime.iter_extend(prefix[start:end], np.arange(start, end, dtype=np.int32), token))
            session.remember_prefix(key, prefix[:end], runtime.context, complete=end == len(prefix))
            return end
        finally:
            self._target.release()

    def _end_fill(self, session: DocumentSession, key: PrefixKey, prefix: np.ndarray, cancel: CancelToken,
                  seconds: float) -> Iterator[BackgroundEvent]:
        """The fill's last event; a finished prefix is saved first (a notice when it is not)."""
        if session.full_prefix_tokens:
            with self._target:  # quick: the save writes what the context holds
                problem = "" if self._closed else self._save_prefix(key, prefix, self._prefix_runtime())
            yield BackgroundEnded("done", len(prefix), len(prefix), seconds, problem)
            return
        status = "cancelled" if cancel.cancelled else "paused"
        yield BackgroundEnded(status, session.filled_tokens, len(prefix), seconds)

    def open_prefix_context(self) -> None:
        """Open the sessions' prefix context now rather than at its first use (the session bench
        measures what it takes)."""
        with self._exclusive():
            self._prefix_runtime()

    def _prefix_runtime(self) -> TargetRuntime:
        """The context that holds sessions' full prefixes, opened on first use: a KV cache as
        large as the main context's, so its memory is checked first."""
        if self._prefix_rt is None:
            n_ctx = self.runtime.context.n_ctx
            kv = target_kv_shape(self.runtime.model).bytes_for(n_ctx)
            require_all_fit(needs_by_device("keeping the document's full prefix in a second context", (
                (self.info.target_memory_device, f"target KV cache for {n_ctx} tokens", kv),)))
            self._prefix_rt = self.runtime.sibling()
        return self._prefix_rt

    def _run(self, run: RunName, text: str, question: str, settings: RunSettings,
             cancel: CancelToken, session: DocumentSession | None = None,
             tokenized: tuple[PreparedPrompt, float] | None = None,
             segments: tuple[Segment, ...] = ()) -> Iterator[EngineEvent]:
        """One run; `tokenized` is the prompt prepared already and when its tokenizing started (TTFT counts from there)."""
        t0 = tokenized[1] if tokenized else time.perf_counter()
        yield StageChanged(run, "tokenizing")
        prompt = tokenized[0] if tokenized else self.prepare(text, question, settings)
        start, end = prompt.doc_token_span
        window = self.window_fit(prompt.n_tokens, settings, end - start)
        cut = None
        if run == "baseline" or window.fits:  # SpecPrefill fits a longer prompt by its selection
            prompt, cut = fit_prompt(self.runtime.model, prompt, self.info.n_ctx, settings.max_new_tokens,
                                     settings.truncate)
        request = _Request(run, prompt, cut, window, settings, cancel, t0, time.perf_counter() - t0, segments)
        if cut is not None:
            yield Notice(run, cut.describe())
        yield from self._baseline(request, session=session) if run == "baseline" else self._spec(request, session)

    def _baseline(self, request: _Request, bypass_reason: str = "",
                  session: DocumentSession | None = None) -> Iterator[EngineEvent]:
        """Full prefill and decode; in a session, in the prefix context, on top of the prefix (or
        the part a background fill did) when it holds it."""
        prompt, run = request.prompt, request.run
        runtime, start, served_by = self.runtime, 0, ""
        if session is not None:
            runtime = self._prefix_runtime()
            key, prefix = self._session_prefix(session, request)
            start = self._held_prefix(session, key, prefix, runtime)
            served_by = "cached_full" if start else "cold_full"  # a part counts too: it is not a cold prefill
            if 0 < start < len(prefix):
                yield Notice(run, f"{start} of the document's {len(prefix)} tokens were prefilled already")
            session.forget_prefix()  # until this prefill has completed the prefix again
            if not start:  # nothing in memory: a saved state, else a cold prefill (TTFT counts the load)
                start = yield from self._saved_prefix(run, key, prefix, runtime)
                served_by = "saved_state" if start else "cold_full"
        positions = np.arange(start, prompt.n_tokens, dtype=np.int32)
        result = yield from self._prefill_and_generate(request, prompt.tokens[start:], positions, prompt.n_tokens,
                                                       extend=start > 0, split=prompt.tail_start - start,
                                                       runtime=runtime)
        if session is not None:
            # Generation only wrote positions after the prefix: the next question removes them.
            session.remember_prefix(key, prefix, runtime.context)
        yield RunFinished(run, RunResult(
            **request.result_fields(), **request.full_prefill_fields(), positions="contiguous",
            bypassed=bool(bypass_reason), bypass_reason=bypass_reason, served_by=served_by, **result))
        # After the answer (saving is never inside its TTFT), a prefix this run completed; not a cut
        # one: a question of another length cuts the document elsewhere, and the state would not serve it.
        if session is not None and start < len(prefix) and request.cut is None:
            problem = self._save_prefix(key, prefix, runtime)
            if problem:
                yield Notice(run, problem)

    def _prefix_key(self, session: DocumentSession, settings: RunSettings) -> PrefixKey:
        info = self.info
        return session.key(info.target_path, info.draft_path, settings.system_prompt, info.n_ctx, info.flash_attn)

    def _document_prefix(self, session: DocumentSession, request: _Request) -> tuple[PrefixKey, np.ndarray]:
        """The request's document prefix and its key."""
        prompt = request.prompt
        return self._prefix_key(session, request.settings), prompt.tokens[:prompt.tail_start]

    def _session_prefix(self, session: DocumentSession, request: _Request) -> tuple[PrefixKey, np.ndarray]:
        """The request's document prefix and its key, noted in the session (what a background fill fills)."""
        key, prefix = self._document_prefix(session, request)
        session.note_prefix(key, prefix)
        return key, prefix

    @staticmethod
    def _held_prefix(session: DocumentSession, key: PrefixKey, prefix: np.ndarray, runtime: TargetRuntime) -> int:
        """Tokens of this prompt's prefix the prefix context holds for the session (all of them, or
        a background fill's part), everything after them removed; 0 when none can be reused."""
        held = session.held_tokens(key, prefix, runtime.context)
        return held if held and runtime.context.remove_after(held) else 0

    def _has_saved_prefix(self, key: PrefixKey) -> bool:
        return self.state_store is not None and self.state_store.has(key)

    def _saved_prefix(self, run: RunName, key: PrefixKey, prefix: np.ndarray, runtime: TargetRuntime):
        """Load this prompt's prefix from the state store into the KV cache; returns its length, or 0
        (no saved state, or one that failed its checks: a Notice says why)."""
        if not self._has_saved_prefix(key):
            return 0
        yield StageChanged(run, "prefill", "loading the document's saved prefix state")
        try:
            loaded = self.state_store.load(runtime.context, key, prefix)
        except STORE_ERRORS as error:  # the cold prefill that follows clears whatever the load left
            loaded = StateLoad(notice=f"saved state not used: {error}; prefilling the document instead")
        if loaded.notice:
            yield Notice(run, loaded.notice)
        return loaded.tokens

    def _save_prefix(self, key: PrefixKey, prefix: np.ndarray, runtime: TargetRuntime) -> str:
        """Save the prefix the KV cache holds (the tail and answer after it removed first) to the store;
        returns why it was not saved ("" when saved, or when saving is off). The session's prefix
        stays valid: its next question removes what follows the prefix anyway."""
        store, context = self.state_store, runtime.context
        if store is None or not store.enabled or not context.remove_after(len(prefix)):
            return ""
        start = time.perf_counter()
        try:
            saved = store.save(context, key, prefix, self.info.target_name)
        except STORE_ERRORS as error:
            return f"the document's prefix state was not saved: {error}"
        if saved is None:
            return "the document's prefix state is larger than the saved-state cache size: not saved"
        log.info("saved the prefix state (%d tokens, %.1f MB) in %.2fs", saved.prefix_tokens,
                 saved.state_bytes / 1e6, time.perf_counter() - start)
        return ""

    def _spec(self, request: _Request, session: DocumentSession | None = None) -> Iterator[EngineEvent]:
        run, prompt, settings, window = request.run, request.prompt, request.settings, request.window
        reason = self.bypass_reason(prompt.n_tokens, settings)
        if reason:
            yield Notice(run, f"bypassed: {reason}; ran full prefill")
            yield from self._baseline(request, bypass_reason=reason, session=session)
            return
        placement = self.resolve_positions(settings.positions, window.fits)
        if placement != settings.positions and settings.positions == "restore":
            yield Notice(run, "restore would place tokens past the target's window: the gaps were compressed instead")
        budget = self.selection_budget(prompt, settings)  # before the draft: a question too long fails at once
        segment_cache = self._draft_segments(session, settings)
        pieces = plan_segments(prompt.n_tokens, prompt.doc_token_span, self.draft_pass_tokens(settings),
                               follow_ups=segment_cache is not None)
        self._require_draft_memory(max(b - a for a, b in pieces) + prompt.n_tokens - window.document_tokens,
                                   ScoringParams.from_settings(settings, prompt.question_rows).question_rows)
        # A full prefix only for a prompt that fits (a background fill completes it); the draft's
        # keys for any: the whole prefix when it scores the prompt in one pass, else each segment's.
        key, prefix = (None, None)
        if session is not None and window.fits:
            key, prefix = self._session_prefix(session, request)
        elif session is not None:  # too long for a full prefill: nothing for a background fill to note
            key, prefix = self._document_prefix(session, request)
        one_pass = len(pieces) == 1
        draft_prefix = self._draft_prefix(key, prefix, settings.draft_window) if key and one_pass else None
        segments = segment_cache if not one_pass else None

        t_draft = time.perf_counter()
        held = segments.count_held(pieces, prompt.tokens.tolist(), prompt.doc_token_span) if segments else 0
        yield StageChanged(run, "draft", _draft_stage_text(prompt.n_tokens, draft_prefix, len(pieces), held))
        with PeakMemory(self.info.device) as draft_mem:
            score = yield from self._progress(run, "draft", self._iter_score(prompt, settings, request.cancel,
                                                                             draft_prefix, segments))
        draft_s = time.perf_counter() - t_draft
        problem = ""
        if draft_prefix is not None:
            problem = self._keep_draft_prefix(key, draft_prefix)
        elif segments is not None:
            problem = self._segments_kept_note(segments, pieces, prompt)
        if problem:
            yield Notice(run, problem)

        t_select = time.perf_counter()
        yield StageChanged(run, "select")
        offsets = token_char_offsets(self.runtime.model, prompt)  # about 0.2 s at 83K tokens
        parts, focus, definitions = self._segment_parts(request, prompt, settings, offsets)
        plan = plan_request_selection(score.importance, prompt, settings, budget, parts, offsets, focus, definitions)
        if plan.focused_parts:
            yield Notice(run, focus_notice(plan.focused_parts))
        kept_idx = plan.kept_idx
        kept_positions, next_position = place_kept(kept_idx, prompt.n_tokens, placement, window.budget)
        select_s = time.perf_counter() - t_select
        start, end = prompt.doc_token_span
        seen = seen_fraction(window.document_tokens, int(np.count_nonzero((kept_idx >= start) & (kept_idx < end))))
        if not window.fits:
            yield Notice(run, window.describe_selection(seen))
        # Before the target's prefill, which can take minutes: the app shows what was kept meanwhile.
        yield SelectionMade(run, Selection(
            chunk_size=settings.chunk_size,
            chunk_starts=list(range(0, prompt.n_tokens, settings.chunk_size)),
            chunk_scores=[float(s) for s in plan.scores], kept_chunks=plan.kept, protected_chunks=plan.protected,
            token_char_offsets=offsets,
            doc_char_span=prompt.parts.doc_char_span))

        result = yield from self._prefill_and_generate(request, prompt.tokens[kept_idx], kept_positions,
                                                       next_position)
        yield RunFinished(run, RunResult(
            **request.result_fields(), draft_s=draft_s, select_s=select_s,
            kept_fraction=len(kept_idx) / prompt.n_tokens, positions=placement,
            draft_peak_mem_bytes=self._draft_peak_bytes(draft_mem), draft_window=settings.draft_window,
            served_by=_spec_served_by(session, score.reused_prefix), fit="fits" if window.fits else "selected",
            seen_fraction=seen, keep_reason=plan.keep_reason, covered_parts=plan.covered_parts,
            focused_parts=list(plan.focused_parts), **result))

    def _segment_parts(self, request: _Request, prompt: PreparedPrompt, settings: RunSettings,
                       offsets: list[int]):
        """The pages or files to cover, and the named files and definitions to keep first (label and
        token range), as far as this request needs them."""
        wanted = wanted_parts(settings, prompt.parts.question, prompt.parts.document, request.segments)
        if not wanted:
            return [], (), ()
        return wanted.in_tokens(offsets, len(prompt.parts.prefix), prompt.doc_token_span)

    def draft_pass_tokens(self, settings: RunSettings) -> int:
        """The longest prompt one draft pass scores: its trained window less the look-ahead."""
        return self.scorer.trained_window - settings.lookahead

    def _iter_score(self, prompt: PreparedPrompt, settings: RunSettings, cancel: CancelToken,
                    draft_prefix: DraftPrefix | None, segments: DocumentSegments | None = None):
        """The draft's scores: one pass (with the cached prefix when there is one), or segments for a
        prompt longer than the draft was trained on (with their cached heads and slices)."""
        tokens, params = prompt.tokens.tolist(), ScoringParams.from_settings(settings, prompt.question_rows)
        if draft_prefix is not None:
            return self.scorer.iter_score(tokens, params, cancel, draft_prefix)
        return iter_score_segments(self.scorer, tokens, prompt.doc_token_span, self.draft_pass_tokens(settings),
                                   params, cancel, segments)

    def selection_budget(self, prompt: PreparedPrompt, settings: RunSettings) -> int | None:
        """Tokens the kept chunks may hold: None when the whole prompt fits the window, else the window
        less the answer's room; the chunks always kept (the first, the question's) must fit in it."""
        window = self.window_fit(prompt.n_tokens, settings)
        if window.fits:
            return None
        start = prompt.tail_start // settings.chunk_size * settings.chunk_size
        always = min(settings.chunk_size, prompt.n_tokens) + prompt.n_tokens - start
        if always > window.budget:
            raise ContextOverflowError(
                f"the question and the template need {always} tokens and the answer {settings.max_new_tokens}, "
                f"more than the target's {window.n_ctx}-token window: shorten the question or lower the max new tokens")
        return window.budget

    def _draft_prefix(self, key: PrefixKey, prefix: np.ndarray, window: int) -> DraftPrefix | None:
        """The draft's kept keys for the document (empty the first time); None when the draft cache is off."""
        if self.draft_caches is None:
            return None
        return self.draft_caches.prefix_for(key, prefix, window)

    def _draft_segments(self, session: DocumentSession | None, settings: RunSettings) -> DocumentSegments | None:
        """The draft's kept segments of a session's document longer than its window; None when there is
        no session or the draft cache is off."""
        if session is None or self.draft_caches is None or not self.draft_caches.enabled:
            return None
        return DocumentSegments(self.draft_caches, self._prefix_key(session, settings), settings.draft_window)

    def _segments_kept_note(self, segments: DocumentSegments, pieces: list, prompt: PreparedPrompt) -> str:
        """Why a follow-up will score some segments again ("" when the cache keeps them all)."""
        held = segments.count_held(pieces, prompt.tokens.tolist(), prompt.doc_token_span)
        if held == len(pieces):
            return ""
        return (f"the draft cache ({format_bytes(self.draft_caches.cap)}) keeps the draft's keys for {held} of "
                f"this document's {len(pieces)} segments: a follow-up scores the others again")

    def _keep_draft_prefix(self, key: PrefixKey, draft_prefix: DraftPrefix) -> str:
        """Keep the draft's keys for the next question; why not ("" when kept, or nothing to keep)."""
        if self.draft_caches.keep(key, draft_prefix):
            return ""
        if draft_prefix.cache is None:
            return ""
        return (f"the draft's keys for this document ({format_bytes(draft_prefix.nbytes())}) are larger than the "
                f"draft cache ({format_bytes(self.draft_caches.cap)}): a follow-up scores the whole document again")

    def _require_draft_memory(self, n_prompt: int, question_rows: int) -> None:
        """The draft's cache grows with the prompt: refuse before scoring rather than die in it."""
        model = self.scorer.model
        bytes_per_value = next(model.parameters()).dtype.itemsize
        require_fits(draft_scoring_need(model.config, bytes_per_value, n_prompt, question_rows), self.info.device)

    def _draft_peak_bytes(self, measured: PeakMemory) -> int:
        """The draft's footprint while scoring: weights plus the working set's peak (CUDA counts both)."""
        if self.info.device.startswith("cuda"):
            return measured.peak_bytes
        return self.info.draft_memory_bytes + measured.peak_bytes

    def _prefill_and_generate(self, request: _Request, tokens: np.ndarray, positions: np.ndarray,
                              next_position: int, extend: bool = False, split: int = 0,
                              runtime: TargetRuntime | None = None):
        """Prefill (from an empty KV cache, or with `extend` on top of what it holds; no batch crosses
        `split`), then stream the answer. Returns the timing fields of RunResult."""
        run, cancel, max_new = request.run, request.cancel, request.settings.max_new_tokens
        runtime = runtime or self.runtime
        yield StageChanged(run, "prefill", f"prefilling {len(tokens)} of {request.prompt.n_tokens} tokens")
        t_prefill = time.perf_counter()
        prefill = runtime.iter_extend if extend else runtime.iter_prefill
        logits = yield from self._progress(run, "prefill", prefill(tokens, positions, cancel, split))
        target_prefill_s = time.perf_counter() - t_prefill

        yield StageChanged(run, "generating")
        pieces: list[str] = []
        ttft_s = decode_s = 0.0
        stop_reason = "eos"
        for i, piece in enumerate(runtime.generate(logits, next_position, max_new, cancel)):
            if i == 0:
                t_first = time.perf_counter()
                ttft_s = t_first - request.t0
            pieces.append(piece.text)
            yield TokenGenerated(run, piece.text, i)
        n_generated = len(pieces)
        if n_generated == 0:
            ttft_s = time.perf_counter() - request.t0  # the first token was end-of-turn
        else:
            decode_s = time.perf_counter() - t_first
        if n_generated >= max_new:
            stop_reason = "max_new_tokens"
        yield StageChanged(run, "done")
        return dict(answer="".join(pieces).strip(), prefill_tokens=len(tokens), ttft_s=ttft_s,
                    decode_tok_s=(n_generated - 1) / decode_s if n_generated > 1 and decode_s > 0 else 0.0,
                    generated_tokens=n_generated, target_prefill_s=target_prefill_s, stop_reason=stop_reason)

    @staticmethod
    def _progress(run: RunName, stage: Stage, steps: Steps):
        """Forward a Steps generator's (done, total) as Progress events; return its result."""
        return (yield from map_steps(steps, lambda done, total: Progress(run, stage, done, total)))
