"""What the main window's controls allow, as pure data: no Qt here.

The window reads a `ViewState` off its sessions and applies `enablement(state)` to its widgets in
one place, so every "what is enabled when" rule lives in this module and is tested without a display.
"""

from __future__ import annotations

from dataclasses import dataclass

BUSY_RUN = "A run is in progress"
BUSY_AB = "An A/B suite is running"
BUSY_CALIBRATION = "This machine is being calibrated"
BUSY_LOADING_MODELS = "The models are loading"
BUSY_NO_MODELS = "The models are not loaded (Models ▸ Reload Models)"
DOCUMENT_LOADING = "The document is loading"
NO_DOCUMENT = "Open a document first"
NO_QUESTION = "Type a question or pick a preset"


@dataclass(frozen=True)
class ViewState:
    """The facts the controls depend on, read off the sessions at one moment."""

    engine_ready: bool = False
    engine_loading: bool = False
    document_loaded: bool = False  # the document session holds a document
    document_loading: bool = False
    thread_open: bool = False  # the active document's thread (questions, answers, caches)
    has_question: bool = False
    run_active: bool = False
    ab_active: bool = False
    calibration_active: bool = False
    fill_active: bool = False  # the background full prefill of the active document

    @property
    def job_active(self) -> bool:
        """A run, suite or calibration holds the engine thread."""
        return self.run_active or self.ab_active or self.calibration_active


@dataclass(frozen=True)
class Enablement:
    """One flag per control or action; the reasons are the tooltips of greyed-out run buttons."""

    run: bool  # Full prefill / SpecPrefill / Compare buttons, and the question bar's Enter
    run_reason: str
    cancel: bool
    ab_run: bool  # the A/B tab's Run
    ab_running: bool  # the A/B tab's own suite is the job running (its Cancel)
    engine_reason: str  # why no engine job can start now ("" when one can)
    calibrate: bool
    open_document: bool  # Open File, Open Folder, the recent menu, drag and drop
    clear_thread: bool  # File ▸ Clear and the thread tab's button
    resume_fill: bool  # the background fill may start or resume now


def why_engine_busy(state: ViewState) -> str | None:
    """Why no run or suite can start now, whatever the document: one engine job at a time."""
    if state.run_active:
        return BUSY_RUN
    if state.ab_active:
        return BUSY_AB
    if state.calibration_active:
        return BUSY_CALIBRATION
    if state.engine_loading:
        return BUSY_LOADING_MODELS
    if not state.engine_ready:
        return BUSY_NO_MODELS
    return None


def why_cannot_run(state: ViewState) -> str | None:
    busy = why_engine_busy(state)
    if busy is not None:
        return busy
    if state.document_loading:
        return DOCUMENT_LOADING
    if not state.document_loaded:
        return NO_DOCUMENT
    if not state.has_question:
        return NO_QUESTION
    return None


def why_cannot_clear(state: ViewState) -> str | None:
    """Clearing waits for a job on the engine thread: it would clear the caches the job uses."""
    if not state.thread_open:
        return NO_DOCUMENT
    if state.job_active:
        return why_engine_busy(state)
    return None


def enablement(state: ViewState) -> Enablement:
    run_reason = why_cannot_run(state)
    engine_reason = why_engine_busy(state)
    return Enablement(
        run=run_reason is None,
        run_reason=run_reason or "",
        # Cancel stops whatever is under way, a model or document load included.
        cancel=state.job_active or state.document_loading or state.engine_loading,
        ab_run=engine_reason is None,
        ab_running=state.ab_active,
        engine_reason=engine_reason or "",
        calibrate=engine_reason is None,
        # Only a run pins the open document (its answer goes to that document's thread).
        open_document=not state.run_active,
        clear_thread=why_cannot_clear(state) is None,
        resume_fill=state.thread_open and engine_reason is None and not state.fill_active,
    )
