"""The engine's public API: everything the desktop app (and other tools) may use, in one place.

The app imports this module only, never the engine's internals (an import-linter contract
checks it). It is cheap to import: the model runtimes (torch, transformers, llama.cpp) load
on the first call of `load_engine` or `prepare_models`, not at the app's start.

The command line uses this API too, and what only its verbs need is in two submodules this
package does not import: engine.api.harness (A/B journals, benchmarks, needles, calibration's
options) and engine.api.maintenance (models, saved states, diagnostics, RPC workers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.about import APP_NAME, app_version
from engine.core.atomic import write_bytes_atomic, write_text_atomic
from engine.core.cancel import NEVER, CancelToken
from engine.core.credits import CREDITS
from engine.core.endpoints import (
    DEFAULT_WORKER_PORT,
    Endpoint,
    is_loopback,
    join_endpoints,
    parse_endpoint,
    parse_endpoints,
    with_default_port,
    worker_start_command,
)
from engine.core.errors import (
    Cancelled,
    ContextOverflowError,
    DefaultModelsError,
    EngineBusyError,
    IngestError,
    InsufficientMemoryError,
    ModelError,
    NotCalibratedError,
    PasswordError,
    PositionsUnsupportedError,
    RuntimeFailure,
    SettingsError,
    SpecPrefillError,
)
from engine.core.events import (
    SERVED_BY_LABELS,
    BackgroundEnded,
    BackgroundEvent,
    BackgroundProgress,
    CompareResult,
    EngineEvent,
    Notice,  # the engine's event; the licences are CREDITS
    Progress,
    ReadAheadEnded,
    ReadAheadEvent,
    ReadAheadProgress,
    RunFinished,
    RunName,
    RunResult,
    Selection,
    SelectionMade,
    Stage,
    StageChanged,
    TokenGenerated,
    run_order,
)
from engine.core.formatting import (
    MISSING,
    format_accuracy,
    format_bytes,
    format_count,
    format_duration,
    format_percent,
    format_percent_short,
    format_rate,
    format_ratio,
    format_seconds,
)
from engine.core.resources import icon_paths
from engine.core.setting_schema import Option, describe, option_of, options, validate, value_type
from engine.core.settings import (
    AUTO_KEEP,
    AUTO_KEEP_BROAD,
    AUTO_KEEP_FLOOR,
    AUTO_KEEP_JOINED,
    AUTO_LONG_LOOKUP_TOKENS,
    DEFAULT_MIN_TOKENS,
    ModelSettings,
    RunSettings,
    nominal_keep,
    sampling_fields,
)
from engine.eval.ab import (
    DEFAULT_KEEPS,
    AbCaseDone,
    AbError,
    AbFinished,
    AbProgress,
    AbRunDone,
    parse_keeps,
    run_suite,
)
from engine.eval.ab_records import run_record
from engine.eval.labels import fit_note, run_label, run_notes, selection_note
from engine.eval.metrics import answer_agreement
from engine.eval.plots import quality_plot_png, ttft_plot_png
from engine.eval.report import render_html, write_csv
from engine.eval.results import AbReport, CaseRecord, GroupSummary, RunRecord, RunSummary, Summary
from engine.eval.suite import DEFAULT_KIND, Case, SuiteError, load_suite, parse_suite
from engine.ingest import load_document
from engine.ingest.document import Document
from engine.llama.rpc.workers import WorkerMemory, query_memory
from engine.models.defaults import DRAFT as DEFAULT_DRAFT
from engine.models.defaults import TARGET as DEFAULT_TARGET
from engine.models.discover import DiscoveredModel, Discovery
from engine.models.discover import discover as discover_models
from engine.models.gguf_header import GGUFHeaderError
from engine.models.gguf_header import read_header as read_gguf_header
from engine.models.identity import content_identity
from engine.models.untrusted import printable
from engine.pipeline.background_thread import BackgroundThread, BackgroundWork, background_work
from engine.pipeline.kept_positions import GAPPED as GAPPED_POSITIONS
from engine.pipeline.model_choice import DraftChoice, PairPlan, plan_pair
from engine.pipeline.model_choice import usable as usable_models
from engine.pipeline.session import SESSION_MODES, DocumentSession

if TYPE_CHECKING:
    from engine.pipeline import Engine
    from engine.pipeline.costmodel import CostModel

__all__ = [
    "APP_NAME",
    "app_version",
    "CREDITS",
    "Notice",
    "icon_paths",
    "AbError",
    "AbFinished",
    "AbProgress",
    "AbRunDone",
    "Cancelled",
    "CancelToken",
    "Case",
    "CompareResult",
    "ContextOverflowError",
    "DEFAULT_DRAFT",
    "DEFAULT_KEEPS",
    "DEFAULT_KIND",
    "DEFAULT_MIN_TOKENS",
    "DEFAULT_TARGET",
    "DefaultModelsError",
    "Document",
    "EngineBusyError",
    "EngineEvent",
    "IngestError",
    "InsufficientMemoryError",
    "MISSING",
    "ModelError",
    "ModelSettings",
    "NEVER",
    "NotCalibratedError",
    "Notice",
    "Option",
    "PasswordError",
    "PositionsUnsupportedError",
    "Progress",
    "RunFinished",
    "RunName",
    "RunResult",
    "RunSettings",
    "RuntimeFailure",
    "Selection",
    "SelectionMade",
    "SettingsError",
    "SpecPrefillError",
    "Stage",
    "StageChanged",
    "SuiteError",
    "TokenGenerated",
    "answer_agreement",
    "describe",
    "format_duration",
    "load_document",
    "load_engine",
    "load_suite",
    "option_of",
    "options",
    "parse_keeps",
    "parse_suite",
    "prepare_models",
    "quality_plot_png",
    "render_html",
    "run_label",
    "run_record",
    "run_suite",
    "run_order",
    "ttft_plot_png",
    "validate",
    "value_type",
    "write_bytes_atomic",
    "write_csv",
    "write_text_atomic",
    "AbCaseDone",
    "AbReport",
    "CaseRecord",
    "GroupSummary",
    "RunRecord",
    "RunSummary",
    "Summary",
    "format_accuracy",
    "calibrate_machine",
    "BackgroundEnded",
    "BackgroundEvent",
    "BackgroundProgress",
    "DocumentSession",
    "SERVED_BY_LABELS",
    "SESSION_MODES",
    "GAPPED_POSITIONS",
    "fit_note",
    "run_notes",
    "selection_note",
    "AUTO_KEEP",
    "AUTO_KEEP_BROAD",
    "AUTO_KEEP_FLOOR",
    "AUTO_KEEP_JOINED",
    "AUTO_LONG_LOOKUP_TOKENS",
    "nominal_keep",
    "format_bytes",
    "format_count",
    "format_percent",
    "format_percent_short",
    "format_rate",
    "format_ratio",
    "format_seconds",
    "DEFAULT_WORKER_PORT",
    "Endpoint",
    "is_loopback",
    "join_endpoints",
    "parse_endpoint",
    "parse_endpoints",
    "with_default_port",
    "worker_start_command",
    "WorkerMemory",
    "query_memory",
    "DiscoveredModel",
    "Discovery",
    "discover_models",
    "GGUFHeaderError",
    "read_gguf_header",
    "sampling_fields",
    "content_identity",
    "printable",
    "DraftChoice",
    "PairPlan",
    "plan_pair",
    "usable_models",
    "ReadAheadEnded",
    "ReadAheadEvent",
    "ReadAheadProgress",
    "BackgroundThread",
    "BackgroundWork",
    "background_work",
]


def load_engine(settings: ModelSettings, progress=None, cancel: CancelToken = NEVER) -> Engine:
    """Both models, loaded and checked (vocabulary, memory, position support)."""
    from engine.pipeline import Engine  # lazy: torch and llama.cpp load here, not at the app's start

    return Engine.load(settings, progress=progress, cancel=cancel)


def prepare_models(
    settings: ModelSettings | None = None, progress=None, cancel: CancelToken = NEVER, *, repair: bool = False
) -> None:
    """Assemble the default models the settings use (and repair broken ones), cache the draft."""
    from engine.pipeline.prepare import prepare_models as prepare  # lazy: imports torch and llama.cpp

    prepare(settings, progress, cancel, repair=repair)


def calibrate_machine(
    engine: Engine, settings: ModelSettings | None = None, progress=None, cancel: CancelToken = NEVER
) -> CostModel:
    """Time this machine's draft and target on the bundled sample, store the cost model and give it
    to the engine; progress(done, total, message) before each timing. Cancelled, nothing is stored."""
    from engine.eval.calibrate import (
        calibrate_machine as calibrate,  # lazy: the cost model imports the pipeline
    )

    return calibrate(engine, settings, progress, cancel)
