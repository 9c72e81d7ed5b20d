"""Looking after the models, caches and machines, for the command line: the default models
(assembling, status), resolving a model by name, timing-only target shapes, the saved prefix
states, diagnostics, the cost model, and llama.cpp RPC workers.

The CLI imports the engine through engine.api only (an import-linter contract checks it): what the
app uses too is in engine.api itself; what only the CLI's verbs need is here and in
engine.api.harness.
"""

from __future__ import annotations

from engine.llama.rpc.workers import WorkerProcess
from engine.models import defaults as model_defaults
from engine.models.discover_sources import MODEL_DIRS_ENV
from engine.models.resolve import resolve_model
from engine.models.shapes import SHAPES, TIMING_ONLY, ensure_shape_file, shape_by_name
from engine.pipeline.costmodel import require as require_cost_model
from engine.pipeline.diagnostics import Check, diagnose, probe_restore_support
from engine.pipeline.state_store import SavedState, StateStore, cap_bytes

__all__ = [
    # models
    "model_defaults",  # the module: its DEFAULTS, OPTIONAL, TARGET, assemble, model_status...
    "MODEL_DIRS_ENV",
    "resolve_model",
    "SHAPES",
    "TIMING_ONLY",
    "ensure_shape_file",
    "shape_by_name",
    # the machine
    "Check",
    "diagnose",
    "probe_restore_support",
    "require_cost_model",
    "WorkerProcess",
    # saved prefix states
    "SavedState",
    "StateStore",
    "cap_bytes",
]
