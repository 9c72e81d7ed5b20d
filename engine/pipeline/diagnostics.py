"""What `specprefill doctor` reports: versions and build flags, devices, each model, the calibration.

Each check is one line; the app can run when the runtimes import, the draft's device is there,
and both default models (or the ones the settings name) are there and verified.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import torch

from engine.core.cpu import cpu_flags
from engine.core.errors import ModelError, NotCalibratedError, SettingsError
from engine.core.formatting import format_bytes
from engine.core.memory import available_bytes
from engine.core.settings import ModelSettings
from engine.draft.loader import DraftDevice, pick_device
from engine.draft.precision import cached_precision, fixed_precision
from engine.llama.cpu_backend import AMX_VARIANTS
from engine.llama.native import LlamaContext, LlamaModel, build_info, cpu_path
from engine.llama.rpc.ggml_backends import has_rpc, lib_dir
from engine.llama.rpc.workers import RPC_SERVER, WorkerMemory, query_memory
from engine.llama.runtime import TargetRuntime
from engine.models import defaults
from engine.pipeline import costmodel
from engine.pipeline.placement import TargetPlacement, place_target
from engine.pipeline.vocab_check import compare_files


@dataclass(frozen=True)
class Check:
    name: str
    text: str
    ok: bool = True


class TargetProbe(NamedTuple):
    restore_supported: bool  # this llama.cpp build accepts gapped positions (`restore`)
    n_layers: int


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def probe_target(target_path: Path) -> TargetProbe:
    """The target opened on the CPU with a small context: does `restore` work, how many layers."""
    model = LlamaModel(target_path)
    runtime = TargetRuntime(model, LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1))
    try:
        return TargetProbe(runtime.accepts_gapped_positions(), model.attention_dims()[0])
    finally:
        runtime.close()


def probe_restore_support(target_path: Path) -> bool:
    """Whether this llama.cpp build accepts gapped positions (`restore`)."""
    return probe_target(target_path).restore_supported


def gpu_devices() -> list[str]:
    """The GPUs torch sees, by device type."""
    present = (("cuda", torch.cuda.is_available()), ("mps", torch.backends.mps.is_available()))
    return [name for name, there in present if there]


def device_memory(device: str) -> str:
    """One device's free memory: "cuda 130.2 GB of 139.8 GB", "mps 20.1 GB", "RAM 10.3 GB"."""
    free = format_bytes(available_bytes(device))
    if device == "cuda":
        return f"cuda {free} of {format_bytes(torch.cuda.mem_get_info()[1])}"
    return f"{'RAM' if device == 'cpu' else device} {free}"


def free_memory() -> str:
    return "free memory: " + ", ".join(device_memory(device) for device in [*gpu_devices(), "cpu"])


def describe_draft_device(device: DraftDevice) -> str:
    """ "cuda (bfloat16, NVIDIA H200)"; "cpu" (its number format is the precision line's)."""
    if device.device.type == "cpu":
        return "cpu"
    details = [str(device.dtype).removeprefix("torch.")]
    if device.device.type == "cuda":
        details.append(torch.cuda.get_device_name(device.device))
    return f"{device.device} ({', '.join(details)})"


def draft_device_type(settings: ModelSettings) -> str:
    """Where the draft would run; "cpu" when the device asked for is missing (the torch line says so)."""
    try:
        return pick_device(settings.device).device.type
    except ModelError:
        return "cpu"


def check_python() -> Check:
    return Check("python", f"{platform.python_version()} ({platform.platform()})")


def check_torch(settings: ModelSettings) -> Check:
    try:
        draft = f"draft on {describe_draft_device(pick_device(settings.device))}"
    except ModelError as exc:
        return Check("torch", f"{torch.__version__}, {exc}; {free_memory()}", ok=False)
    return Check("torch", f"{torch.__version__}, {draft}, {torch.get_num_threads()} threads; {free_memory()}")


def describe_target_placement(placement: TargetPlacement, n_layers: int | None) -> str:
    """ "target: CPU (llama.cpp build has no GPU offload)" or "GPU offload: all 28 layers (CUDA)"."""
    if not placement.offloaded:
        return f"target: {placement.describe()}"
    layers = f"all {n_layers} layers" if n_layers is not None else "all layers"
    return f"GPU offload: {layers} ({placement.backend})"


def check_cpu_path() -> Check:
    """The CPU variant llama.cpp runs on, its extra buffer types and the AMX self-test's verdict."""
    try:
        path = cpu_path()
    except RuntimeError as exc:
        return Check("cpu", str(exc), ok=False)
    return Check("cpu", path.summary())  # a failed self-test is a working fallback, not an error


def check_draft_precision(settings: ModelSettings, draft: Path | None) -> Check:
    """The draft's number format and why: fixed (a GPU, the user's setting) or measured on this CPU
    once (engine.draft.precision); before the first load, that it will be measured then."""
    try:
        device = pick_device(settings.device)
        fixed = fixed_precision(settings.draft_quant, device.device, device.dtype)
    except (ModelError, SettingsError) as exc:
        return Check("precision", str(exc), ok=False)
    if fixed is not None:
        return Check("precision", f"draft {fixed.summary()}")
    verdict = cached_precision(draft) if draft is not None else None
    if verdict is None:
        return Check(
            "precision",
            "draft auto: not measured yet on this CPU; the first load times int8, bf16 and fp32 (about a minute, once)",
        )
    return Check("precision", f"draft {verdict.summary()}, {verdict.measured_at}")


def amx_verdict() -> str:
    """Whether the target's matrix multiplications run on AMX, and why (or why not)."""
    flags = cpu_flags()
    if "amx_int8" not in flags or "amx_tile" not in flags:
        return "off: this CPU has no AMX (no amx_tile/amx_int8 among its flags); the target uses its vector units"
    try:
        path = cpu_path()
    except RuntimeError as exc:
        return f"unknown: {exc}"
    torch_amx = "torch's bf16 matmul runs on AMX here" if "amx_bf16" in flags else "no AMX-BF16 for torch"
    if path.extra_bufts and path.variant in AMX_VARIANTS:
        return f"on: the {path.variant} variant's self-test passed ({torch_amx})"
    return (
        f"off: the {path.variant} variant's AMX buffers are not used (self-test: {path.verdict}); "
        f"its AVX-512 kernels run instead ({torch_amx})"
    )


def check_llama(target: Path | None, draft_device: str = "cpu", flash_attn: str = "auto") -> Check:
    flags, gpu_offload = build_info()
    probe = probe_target(target) if target is not None else None
    restore = probe.restore_supported if probe is not None else None
    positions = {
        True: "restore positions supported",
        False: "restore positions NOT supported (renumber)",
        None: "restore positions unknown (no verified target)",
    }[restore]
    placement = place_target(draft_device, gpu_offload, flags)
    offload = describe_target_placement(placement, probe.n_layers if probe is not None else None)
    attention = f"flash attention {placement.flash_attn(flash_attn)}"
    return Check(
        "llama.cpp", f"{package_version('llama-cpp-python')}, {offload}, {attention}, {positions}; {flags}"
    )


def describe_worker(memory: WorkerMemory) -> str:
    if memory.error:
        return f"RPC {memory.endpoint} {memory.error}"
    return f"RPC {memory.endpoint} (lends {format_bytes(memory.free_bytes)} of {format_bytes(memory.total_bytes)})"


def check_backends(settings: ModelSettings) -> Check:
    """The target's backends: this machine, then each RPC worker with what it lends (asked over RPC)."""
    built = has_rpc()
    tool = "installed" if (lib_dir() / RPC_SERVER).is_file() else "not installed"
    build = f"RPC backend {'built' if built else 'NOT built'}, worker tool {tool}"
    workers = settings.workers
    if not workers:
        return Check("backends", f"CPU (no RPC workers set; {build})")
    if not built:
        return Check("backends", f"{build}: rebuild llama.cpp to use --rpc", ok=False)
    memories = [query_memory(endpoint) for endpoint in workers]
    listed = "; ".join(["CPU", *map(describe_worker, memories)])
    return Check("backends", f"{listed} ({build})", ok=not any(m.error for m in memories))


def check_model(spec: defaults.ModelSpec, custom: Path | None) -> Check:
    if custom is not None:
        exists = Path(custom).exists()
        return Check(spec.role, f"{custom} ({'custom' if exists else 'custom, MISSING'})", exists)
    status = defaults.model_status(spec)
    size = f", {format_bytes(status.size_bytes)}" if status.exists else ""
    return Check(spec.role, f"{spec.name} at {status.path} ({status.detail}{size})", status.verified)


def check_vocab(target: Path | None, draft: Path | None) -> Check:
    """Which vocabulary verdict applies (identical, compatible or different); read from the files' headers."""
    if target is None or draft is None:
        return Check("vocabulary", "not compared (a model is missing or unverified)")
    try:
        match = compare_files(target, draft)
    except ModelError as exc:
        return Check("vocabulary", f"not compared: {exc}", ok=False)
    if match.verdict != "different":
        return Check("vocabulary", f"{match.describe()}; selection by token ids")
    if Path(draft).is_dir():
        return Check(
            "vocabulary", f"{match.describe()}; a draft of another family must be a GGUF file", ok=False
        )
    return Check("vocabulary", f"{match.describe()}; selection by character spans (docs/cross-family.md)")


def check_calibration() -> Check:
    try:
        model = costmodel.load()
    except NotCalibratedError as exc:
        return Check("calibration", f"unreadable: {exc}")
    if model is None:
        return Check("calibration", "none (the fixed 4,096-token threshold decides the bypass)")
    return Check(
        "calibration",
        f"{model.machine.get('date', 'undated')}, measured at "
        f"{', '.join(model.measurements.get('target', {}))} tokens",
    )


def diagnose(settings: ModelSettings | None = None) -> list[Check]:
    settings = settings or ModelSettings()
    models = [
        check_model(defaults.TARGET, settings.target_path),
        check_model(defaults.DRAFT, settings.draft_path),
    ]
    target = (settings.target_path or defaults.TARGET.path) if models[0].ok else None
    draft = (settings.draft_path or defaults.DRAFT.path) if models[1].ok else None
    return [
        check_python(),
        check_torch(settings),
        check_llama(target, draft_device_type(settings), settings.flash_attn),
        check_cpu_path(),
        Check("amx", amx_verdict()),
        check_draft_precision(settings, draft),
        check_backends(settings),
        *models,
        check_vocab(target, draft),
        check_calibration(),
    ]
