"""What `specprefill doctor` reports: versions and build flags, devices, each model, the calibration.

Each check is one line; the app can run when the runtimes import and both default models (or
the ones the settings name) are there and verified.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import psutil
import torch

from engine.core.errors import NotCalibratedError
from engine.core.formatting import format_bytes
from engine.core.settings import ModelSettings
from engine.draft.loader import pick_device
from engine.llama.native import LlamaContext, LlamaModel, build_info
from engine.llama.runtime import TargetRuntime
from engine.models import defaults
from engine.pipeline import costmodel


@dataclass(frozen=True)
class Check:
    name: str
    text: str
    ok: bool = True


def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def probe_restore_support(target_path: Path) -> bool:
    """Whether this llama.cpp build accepts gapped positions (`restore`), on a small context."""
    model = LlamaModel(target_path)
    runtime = TargetRuntime(model, LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1))
    try:
        return runtime.accepts_gapped_positions()
    finally:
        runtime.close()


def check_python() -> Check:
    return Check("python", f"{platform.python_version()} ({platform.platform()})")


def check_torch(settings: ModelSettings) -> Check:
    device = pick_device(settings.device)
    where = str(device.device)
    if device.device.type == "cuda":
        free, total = torch.cuda.mem_get_info()
        where += f" {torch.cuda.get_device_name()} ({format_bytes(free)} free of {format_bytes(total)})"
    else:
        where += f" ({format_bytes(psutil.virtual_memory().available)} RAM free)"
    return Check("torch", f"{torch.__version__}, draft on {where}, {torch.get_num_threads()} threads")


def check_llama(target: Path | None) -> Check:
    flags, gpu_offload = build_info()
    restore = probe_restore_support(target) if target is not None else None
    positions = {True: "restore positions supported", False: "restore positions NOT supported (renumber)",
                 None: "restore positions unknown (no verified target)"}[restore]
    offload = "GPU offload available" if gpu_offload else "CPU only (no GPU offload in this build)"
    return Check("llama.cpp", f"{package_version('llama-cpp-python')}, {offload}, {positions}; {flags}")


def check_model(spec: defaults.ModelSpec, custom: Path | None) -> Check:
    if custom is not None:
        exists = Path(custom).exists()
        return Check(spec.role, f"{custom} ({'custom' if exists else 'custom, MISSING'})", exists)
    status = defaults.model_status(spec)
    size = f", {format_bytes(status.size_bytes)}" if status.exists else ""
    return Check(spec.role, f"{spec.name} at {status.path} ({status.detail}{size})", status.verified)


def check_calibration() -> Check:
    try:
        model = costmodel.load()
    except NotCalibratedError as exc:
        return Check("calibration", f"unreadable: {exc}")
    if model is None:
        return Check("calibration", "none (the fixed 4,096-token threshold decides the bypass)")
    return Check("calibration", f"{model.machine.get('date', 'undated')}, measured at "
                                f"{', '.join(model.measurements.get('target', {}))} tokens")


def diagnose(settings: ModelSettings | None = None) -> list[Check]:
    settings = settings or ModelSettings()
    models = [check_model(defaults.TARGET, settings.target_path), check_model(defaults.DRAFT, settings.draft_path)]
    target_ok = models[0].ok
    target = settings.target_path or (defaults.TARGET.path if target_ok else None)
    return [check_python(), check_torch(settings), check_llama(target), *models, check_calibration()]
