"""The window's enablement rules, checked as pure data: no Qt, no display, no engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from desktop.model.view_state import (
    BUSY_AB,
    BUSY_CALIBRATION,
    BUSY_LOADING_MODELS,
    BUSY_NO_MODELS,
    BUSY_RUN,
    DOCUMENT_LOADING,
    NO_DOCUMENT,
    NO_QUESTION,
    Enablement,
    ViewState,
    enablement,
    why_cannot_clear,
    why_cannot_run,
    why_engine_busy,
)

ROOT = Path(__file__).resolve().parents[2]
VIEW_STATE = ROOT / "desktop" / "model" / "view_state.py"

IDLE = ViewState(engine_ready=True)  # models loaded, nothing open
OPEN = replace(IDLE, document_loaded=True, thread_open=True)  # a document open, no question yet
ASKABLE = replace(OPEN, has_question=True)

# name -> (state, the flags that are on; every other boolean flag is off)
TABLE = {
    "first start: nothing loaded": (ViewState(), {"open_document"}),
    "models loading": (ViewState(engine_loading=True), {"open_document", "cancel"}),
    "models failed, document open": (replace(OPEN, engine_ready=False), {"open_document", "clear_thread"}),
    "models ready, no document": (IDLE, {"open_document", "ab_run", "calibrate"}),
    "document loading": (
        replace(IDLE, document_loading=True),
        {"open_document", "ab_run", "calibrate", "cancel"},
    ),
    "document open, no question": (
        OPEN,
        {"open_document", "ab_run", "calibrate", "clear_thread", "resume_fill"},
    ),
    "ready to run": (ASKABLE, {"run", "open_document", "ab_run", "calibrate", "clear_thread", "resume_fill"}),
    "run in progress": (replace(ASKABLE, run_active=True), {"cancel"}),
    "A/B suite running": (replace(ASKABLE, ab_active=True), {"cancel", "open_document", "ab_running"}),
    "calibrating": (replace(ASKABLE, calibration_active=True), {"cancel", "open_document"}),
    "background fill under way": (
        replace(ASKABLE, fill_active=True),
        {"run", "open_document", "ab_run", "calibrate", "clear_thread"},
    ),
    "reloading models with a document open": (
        replace(ASKABLE, engine_ready=False, engine_loading=True),
        {"cancel", "open_document", "clear_thread"},
    ),
    "a second document loading over the first": (
        replace(ASKABLE, document_loading=True),
        {"cancel", "open_document", "ab_run", "calibrate", "clear_thread", "resume_fill"},
    ),
}

FLAGS = [f.name for f in fields(Enablement) if f.type in (bool, "bool")]  # the reasons are strings


def on_flags(allowed: Enablement) -> set[str]:
    return {name for name in FLAGS if getattr(allowed, name)}


@pytest.mark.parametrize("name", list(TABLE))
def test_enablement_table(name):
    state, expected = TABLE[name]
    assert on_flags(enablement(state)) == expected


def test_every_flag_is_on_in_some_row_and_off_in_another():
    """A flag the table never turns on (or off) would be a rule no row tests."""
    seen_on = set().union(*(on_flags(enablement(state)) for state, _ in TABLE.values()))
    seen_off = set().union(*(set(FLAGS) - on_flags(enablement(state)) for state, _ in TABLE.values()))
    assert seen_on == set(FLAGS)
    assert seen_off == set(FLAGS)


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (ViewState(), BUSY_NO_MODELS),
        (ViewState(engine_loading=True), BUSY_LOADING_MODELS),
        (replace(ASKABLE, run_active=True, ab_active=True), BUSY_RUN),  # the first reason wins
        (replace(ASKABLE, ab_active=True, calibration_active=True), BUSY_AB),
        (replace(ASKABLE, calibration_active=True, engine_loading=True), BUSY_CALIBRATION),
        (replace(IDLE, document_loading=True, document_loaded=True), DOCUMENT_LOADING),
        (IDLE, NO_DOCUMENT),
        (OPEN, NO_QUESTION),
        (ASKABLE, None),
    ],
)
def test_why_a_run_cannot_start_names_the_first_obstacle(state, reason):
    assert why_cannot_run(state) == reason
    allowed = enablement(state)
    assert allowed.run is (reason is None)
    assert allowed.run_reason == (reason or "")  # the run buttons' tooltip


def test_engine_jobs_wait_for_the_models_but_not_for_a_document():
    assert why_engine_busy(IDLE) is None
    assert enablement(IDLE).engine_reason == ""
    assert enablement(ViewState()).engine_reason == BUSY_NO_MODELS
    assert not enablement(ViewState()).ab_run and not enablement(ViewState()).calibrate


def test_clearing_waits_only_for_engine_jobs():
    assert why_cannot_clear(replace(ViewState(), thread_open=False)) == NO_DOCUMENT
    assert why_cannot_clear(replace(OPEN, engine_ready=False)) is None  # no models: nothing to wait for
    assert why_cannot_clear(replace(OPEN, engine_loading=True)) is None
    assert why_cannot_clear(replace(OPEN, ab_active=True)) == BUSY_AB
    assert why_cannot_clear(replace(OPEN, fill_active=True)) is None  # clearing cancels the fill itself


def test_only_a_run_pins_the_open_document():
    for field in ("ab_active", "calibration_active", "engine_loading", "document_loading", "fill_active"):
        assert enablement(replace(ASKABLE, **{field: True})).open_document, field
    assert not enablement(replace(ASKABLE, run_active=True)).open_document


def test_the_state_and_its_enablement_are_frozen():
    with pytest.raises(AttributeError):
        IDLE.engine_ready = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        enablement(IDLE).run = True  # type: ignore[misc]


# --- no Qt ---------------------------------------------------------------------------------------

QT_ROOTS = {"PySide6", "shiboken6", "PyQt5", "PyQt6", "PySide2", "qtpy"}


def imported_roots(source: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_import_check_sees_a_qt_import():
    assert "PySide6" in imported_roots("import os\nfrom PySide6.QtCore import QObject\n")
    assert "PySide6" in imported_roots("def f():\n    import PySide6.QtWidgets\n")


def test_view_state_imports_nothing_from_qt_or_the_rest_of_the_app():
    roots = imported_roots(VIEW_STATE.read_text(encoding="utf-8"))
    assert not roots & QT_ROOTS
    assert roots <= {"__future__", "dataclasses"}, roots  # pure data: nothing that could pull Qt in


def test_importing_view_state_loads_no_qt_module():
    code = (
        "import sys, desktop.model.view_state\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {sorted(QT_ROOTS)!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
