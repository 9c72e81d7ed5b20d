"""What produced an A/B report's numbers: models (with hashes when they are the defaults), runtime,
versions, and the settings every run of the suite shared."""

from __future__ import annotations

import platform
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core.settings import RunSettings, greedy
from engine.eval.results import CaseRecord, Environment, ModelEntry, Versions
from engine.models import defaults as models

if TYPE_CHECKING:
    from engine.pipeline import Engine


def describe_environment(
    engine: Engine, settings: RunSettings, records: list[CaseRecord], *, reuse_cache: bool = False
) -> Environment:
    """What produced these numbers: models (with hashes when they are the defaults), runtime, settings."""
    info = engine.info
    return Environment(
        target=_model_entry(info.target_name, info.target_path, models.TARGET),
        draft=_model_entry(info.draft_name, info.draft_path, models.DRAFT),
        device=info.device,
        n_ctx=info.n_ctx,
        restore_supported=info.positions_supported,
        positions_requested=settings.positions,
        positions_used=_positions_used(records),
        threads=_threads(info),
        versions=_versions(info),
        platform=platform.platform(),
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        settings=settings_record(settings),
        reuse_cache=reuse_cache,
    )


def settings_record(settings: RunSettings) -> dict:
    """The settings every run of a suite shares: all but keep, which each run sets; greedy, as run_suite runs."""
    return {k: v for k, v in asdict(greedy(settings)).items() if k != "keep"}


def _model_entry(name: str, path: Path, default: models.ModelSpec) -> ModelEntry:
    # Engine.load verifies a default model's hash before use; a custom file is not re-hashed here.
    is_default = Path(path) == default.path
    return ModelEntry(
        name=name, path=str(path), default=is_default, sha256=default.sha256 if is_default else None
    )


def _positions_used(records: list[CaseRecord]) -> str | None:
    """The mode the SpecPrefill runs placed tokens with; None when every run was bypassed."""
    modes = sorted(
        {
            run.result.positions
            for record in records
            for run in record.spec.values()
            if not run.result.bypassed
        }
    )
    return "+".join(modes) if modes else None


def _threads(info) -> int | None:
    explicit = getattr(info, "n_threads", None)
    if explicit:
        return explicit
    # Engine.load sets torch's thread count to the one it gives llama.cpp; read it only if torch is loaded.
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _versions(info) -> Versions:
    # The CPU path too: results of different CPU variants are not comparable.
    return Versions(
        python=platform.python_version(),
        torch=_package_version("torch"),
        llama_cpp_python=_package_version("llama-cpp-python"),
        specprefill=_package_version("specprefill"),
        cpu_path=getattr(info, "cpu_path", "") or None,
    )  # test doubles of EngineInfo lack it


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
