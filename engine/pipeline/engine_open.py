"""Opening the models: the target (in this process or over RPC workers), the draft, and what
the engine reports of both (EngineInfo)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil
import torch

from engine.core.cancel import NEVER, CancelToken
from engine.core.endpoints import parse_split
from engine.core.errors import ModelError, SettingsError
from engine.core.memory import require_all_fit
from engine.core.resources import calibration_sample
from engine.core.settings import MAX_CONTEXT_DEFAULT, ModelSettings
from engine.draft.loader import DraftDevice, draft_eos_ids, load_draft_model, pick_device
from engine.draft.memory import draft_weight_bytes
from engine.draft.precision import SAMPLE_TOKENS, DraftPrecision, fixed_precision, measure_or_cached
from engine.draft.scorer import ATTN_IMPL, DraftScorer, ScoringParams
from engine.llama.memory import load_needs
from engine.llama.native import LlamaContext, LlamaModel, build_info, cpu_path
from engine.llama.prompt import repeated_tokens
from engine.llama.rpc.host import HostInfo, HostSpec
from engine.llama.rpc.proxies import RemoteContext, open_remote_target
from engine.llama.runtime import TargetRuntime
from engine.models import defaults as models
from engine.pipeline.peak_memory import held_bytes
from engine.pipeline.placement import TargetPlacement, place_target
from engine.pipeline.vocab_check import draft_vocab_for_spans

log = logging.getLogger(__name__)
LoadProgress = Callable[[int, int, str], None]


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
    flash_attn: str = (
        "auto"  # the target context's flash attention: "on", "off", or "auto" (llama.cpp's pick)
    )
    target_backends: tuple[str, ...] = (
        "CPU",
    )  # where the target's layers run: "CPU", "CUDA", "RPC HOST:PORT"
    draft_trained_window: int = 0  # the positions the draft was trained on (0: not known)
    cpu_path: str = ""  # llama.cpp's CPU variant, extra buffers and self-test (engine.llama.cpu_backend)
    draft_precision: str = (
        ""  # the draft's number format: "int8", "bf16", "fp32", "fp16" (engine.draft.precision)
    )
    draft_precision_reason: str = ""  # why: set by the user, a GPU's half precision, or measured here
    draft_forward_s_per_1k: float = (
        0.0  # that format's measured forward, seconds per 1K tokens (0: not measured)
    )
    # The draft's own vocabulary (vocab only) when it is not the target's: SpecPrefill selects
    # through character spans (engine.pipeline.spec_run); None: the draft selects target tokens.
    draft_vocab: LlamaModel | None = field(default=None, compare=False, repr=False)

    @property
    def selection(self) -> str:
        """How the draft's selection reaches the target: "tokens" or "spans"."""
        return "tokens" if self.draft_vocab is None else "spans"


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
        raise SettingsError(
            f"context size {requested} is more than {target_name} was trained for ({trained} tokens)"
        )
    return requested


def _display_name(path: Path, spec: models.ModelSpec) -> str:
    """The model's name where it is the default or an optional model (models --assemble), else its file name."""
    for known in (spec, *models.OPTIONAL.values()):
        if path == known.path:
            return known.name
    return path.name


RPC_LOCAL_CPU = "its layers are split with RPC workers; this machine's share runs on its CPU"


def _place_target(device: DraftDevice, workers: bool) -> TargetPlacement:
    flags, gpu_offload = build_info()
    placement = (
        TargetPlacement(0, "cpu", reason=RPC_LOCAL_CPU)
        if workers
        else place_target(str(device.device), gpu_offload, flags)
    )
    log.info("draft on %s, target on %s", device.device, placement.describe())
    return placement


def _open_target(
    settings: ModelSettings,
    target_path: Path,
    target_name: str,
    draft_path: Path,
    draft_name: str,
    device: DraftDevice,
    placement: TargetPlacement,
    threads: int,
) -> tuple[TargetRuntime, LlamaModel | None]:
    """The target and its context, created once the vocabularies are read and the memory suffices;
    with the draft's own vocabulary when it is another family's (draft_vocab_for_spans).

    The checks read the target opened on the CPU (mapped, nothing copied yet); only then is it
    opened again with its layers on the GPU, so a GPU too small is refused with the figures
    before llama.cpp fails to allocate there."""
    target = LlamaModel(target_path)
    try:
        draft_vocab = draft_vocab_for_spans(target, target_name, draft_path, draft_name)
        n_ctx = context_size(settings.n_ctx, target.n_ctx_train(), target_name)
        draft_weights = draft_weight_bytes(draft_path, device.dtype.itemsize)
        require_all_fit(
            load_needs(
                target,
                n_ctx,
                placement.memory_device,
                draft_weights,
                str(device.device),
                local_weights=not settings.workers,
            )
        )
        flash_attn = placement.flash_attn(settings.flash_attn)
        if settings.workers:
            n_layers = target.attention_dims()[0]
            target.close()
            return _open_remote_target(
                settings, target_path, n_layers, n_ctx, threads, flash_attn
            ), draft_vocab
        if placement.offloaded:
            target.close()
            target = LlamaModel(target_path, n_gpu_layers=placement.n_gpu_layers)
        return TargetRuntime(
            target,
            LlamaContext(
                target, n_ctx=n_ctx, n_batch=settings.n_batch, n_threads=threads, flash_attn=flash_attn
            ),
        ), draft_vocab
    except BaseException:
        target.close()  # free the native memory now, not at garbage collection
        raise


def _open_remote_target(
    settings: ModelSettings, target_path: Path, n_layers: int, n_ctx: int, threads: int, flash_attn: str
) -> TargetRuntime:
    """The target in a host process, its layers split between this machine and the RPC workers."""
    workers = settings.workers
    spec = HostSpec(
        target_path, n_layers, tuple(map(str, workers)), parse_split(settings.rpc_split, len(workers))
    )
    model = open_remote_target(spec, workers, settings.rpc_timeout)
    try:
        return TargetRuntime(
            model,
            RemoteContext(
                model, n_ctx=n_ctx, n_batch=settings.n_batch, n_threads=threads, flash_attn=flash_attn
            ),
        )
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
    """ "CPU", "GPU (all layers, CUDA)", or "CPU 10 layers + 2 RPC workers 9+9"."""
    info = _host_info(runtime)
    if info is None:
        return placement.where
    split = info.split
    workers = "+".join(map(str, split.worker_layers))
    return f"CPU {split.local_layers} layers + {len(split.worker_layers)} RPC workers {workers}"


def _tensor_bytes(model) -> int:
    """Bytes of the parameters and buffers torch can see (int8-packed Linear weights are not among them)."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def open_models(
    settings: ModelSettings, progress: LoadProgress | None = None, cancel: CancelToken = NEVER
) -> tuple[TargetRuntime, DraftScorer, EngineInfo]:
    """The target, the draft's scorer and what the engine reports of them; the target is closed
    again when anything after it fails."""
    target_path, draft_path = _resolve_paths(settings)
    threads = settings.n_threads or default_threads()
    torch.set_num_threads(threads)
    device = pick_device(settings.device)
    placement = _place_target(device, bool(settings.workers))
    target_name = _display_name(target_path, models.TARGET)
    draft_name = _display_name(draft_path, models.DRAFT)

    if progress:
        progress(0, 3, f"loading target {target_name}")
    runtime, draft_vocab = _open_target(
        settings, target_path, target_name, draft_path, draft_name, device, placement, threads
    )
    try:
        cancel.raise_if_cancelled()
        if progress:
            progress(1, 3, f"loading draft {draft_name}")
        announce = (lambda text: progress(1, 3, text)) if progress else None
        vocab = draft_vocab or runtime.model
        precision = choose_draft_precision(settings, device, draft_path, lambda: vocab, announce, cancel)
        before = held_bytes(device.device)
        draft = load_draft_model(draft_path, device, ATTN_IMPL, precision.precision)
        # RSS growth is noisy (the allocator may reuse freed pages): never report less
        # than the tensors the draft plainly holds.
        draft_weights = max(held_bytes(device.device) - before, _tensor_bytes(draft))
        cancel.raise_if_cancelled()
        scorer = DraftScorer(draft, draft_eos_ids(draft))
        if progress:
            progress(2, 3, "probing position support")
        info = EngineInfo(
            target_name=target_name,
            draft_name=draft_name,
            target_path=target_path,
            draft_path=draft_path,
            positions_supported=runtime.accepts_gapped_positions(),
            device=str(device.device),
            draft_memory_bytes=draft_weights,
            n_ctx=runtime.context.n_ctx,
            target_device=_target_where(runtime, placement),
            target_offload_reason=placement.reason,
            target_memory_device=placement.memory_device,
            flash_attn=runtime.context.flash_attn,
            target_backends=_target_backends(runtime, placement),
            draft_trained_window=scorer.trained_window,
            cpu_path=cpu_path().summary(),
            draft_precision=precision.precision,
            draft_precision_reason=precision.reason,
            draft_forward_s_per_1k=precision.seconds_per_1k.get(precision.precision, 0.0),
            draft_vocab=draft_vocab,
        )
    except BaseException:
        runtime.close()  # free the target's native memory now, not at garbage collection
        raise
    return runtime, scorer, info


MEASURING_PRECISION = "measuring the draft's speed in int8, bf16 and fp32 on this CPU (once)"


def choose_draft_precision(
    settings: ModelSettings,
    device: DraftDevice,
    draft_path: Path,
    vocab: Callable[[], LlamaModel],
    announce: Callable[[str], None] | None,
    cancel: CancelToken,
) -> DraftPrecision:
    """The draft's number format: a GPU's half precision, the user's, or measured on this CPU once
    (engine.draft.precision) over the calibration sample in the draft's own tokens (`vocab()` its
    vocabulary, asked for only then); `announce` is told before a measurement starts."""
    fixed = fixed_precision(settings.draft_quant, device.device, device.dtype)
    if fixed is not None:
        return fixed

    def load(precision: str):
        cancel.raise_if_cancelled()
        return load_draft_model(draft_path, device, ATTN_IMPL, precision)

    def sample() -> list[int]:
        return vocab().tokenize(calibration_sample(), parse_special=False)[:SAMPLE_TOKENS]

    told = (lambda: announce(MEASURING_PRECISION)) if announce else None
    return measure_or_cached(draft_path, load, sample, told)


WARM_UP_TOKENS = 16


def warm_up(runtime: TargetRuntime, scorer: DraftScorer, draft_vocab: LlamaModel | None) -> None:
    """One tiny pass through each model, so the first run of a session pays no first-touch costs
    (the target's weights are mapped pages read on first use): whichever run comes first, both
    start from the same warm state.

    Each model reads the text in its own token ids: a draft of another family tokenizes it with its
    own vocabulary (`draft_vocab`: EngineInfo.draft_vocab), since the target's ids may lie past the
    draft's; None: the draft shares the target's vocabulary and reads the target's ids."""
    tokens = repeated_tokens(runtime.model, "warm up", WARM_UP_TOKENS, "warm-up")
    runtime.prefill(np.asarray(tokens, dtype=np.int32), np.arange(len(tokens), dtype=np.int32))
    runtime.context.clear()
    draft_tokens = (
        tokens if draft_vocab is None else repeated_tokens(draft_vocab, "warm up", WARM_UP_TOKENS, "warm-up")
    )
    scorer.score(draft_tokens, ScoringParams(lookahead=1, kernel=1))
