"""What the main window hands its flows: its widgets, its sessions, and the few callbacks that
stay the window's own (what is enabled, the run settings, the prediction). A flow gets these,
never the window, so no flow imports desktop.window.main_window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from desktop.model.doc_threads import ThreadBook
from desktop.model.prediction import Prediction
from desktop.model.view_state import Enablement
from desktop.sessions.ab_session import AbSession
from desktop.sessions.background_fill import BackgroundFill
from desktop.sessions.calibration_session import CalibrationSession
from desktop.sessions.engine_host import EngineHost
from desktop.sessions.open_document import OpenDocument
from desktop.sessions.run_session import RunSession
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.ab_tab import AbTab
from desktop.widgets.answer_diff import AnswerCompareView
from desktop.widgets.comparison_bar import ComparisonBar
from desktop.widgets.document_info import DocumentInfoBar
from desktop.widgets.engine_status import EngineStatus
from desktop.widgets.error_banner import ErrorBanner
from desktop.widgets.fill_status import FillStatus
from desktop.widgets.kept_view import KeptTokenView
from desktop.widgets.question_bar import QuestionBar
from desktop.widgets.run_controls import RunControls
from desktop.widgets.run_pane import RunPane
from desktop.widgets.thread_view import ThreadView
from engine.api import RunSettings


@dataclass(frozen=True)
class WindowViews:
    """The window's widgets that the flows update."""

    dialog_parent: QWidget  # what the flows' dialogs are modal to
    status_bar: QStatusBar
    banner: ErrorBanner
    doc_info: DocumentInfoBar
    question: QuestionBar
    controls: RunControls
    panes: dict[str, RunPane]  # "baseline", "spec"
    comparison: ComparisonBar
    compare_caption: QLabel  # says what a compare on a follow-up compares
    kept_view: KeptTokenView
    answers: AnswerCompareView
    ab_tab: AbTab
    thread_view: ThreadView
    fill_status: FillStatus
    engine_status: EngineStatus


@dataclass(frozen=True)
class WindowSessions:
    """The window's sessions, its settings and its documents' threads (`threads.active`: the open one's)."""

    store: SettingsStore
    host: EngineHost
    documents: OpenDocument
    runs: RunSession
    ab: AbSession
    calibration: CalibrationSession
    fill: BackgroundFill
    threads: ThreadBook


@dataclass(frozen=True)
class WindowHooks:
    """What stays the window's to decide: the flows call back into it for these."""

    enablement: Callable[[], Enablement]
    apply_enablement: Callable[[], None]  # the one place controls are enabled or greyed out
    resume_fill: Callable[[], None]  # idle again: the background fill may go on
    run_settings: Callable[[], RunSettings]
    predict: Callable[[RunSettings], Prediction | None]
    refresh_prediction: Callable[[], None]
    refresh_ab_context: Callable[[], None]  # the A/B tab's quick check follows the open document
    show_tab: Callable[[str], None]
    reassemble_models: Callable[[], None]


def create_views(dialog_parent: QWidget, status_bar: QStatusBar) -> WindowViews:
    """The window's widgets, new; the fill's status and the engine's go into `status_bar`."""
    compare_caption = QLabel("")
    compare_caption.setObjectName("compareCaption")
    compare_caption.setStyleSheet("font-style: italic;")
    compare_caption.hide()
    fill_status = FillStatus()
    status_bar.addPermanentWidget(fill_status)
    return WindowViews(
        dialog_parent=dialog_parent,
        status_bar=status_bar,
        banner=ErrorBanner(),
        doc_info=DocumentInfoBar(),
        question=QuestionBar(),
        controls=RunControls(),
        panes={"baseline": RunPane("baseline", "Full prefill"), "spec": RunPane("spec", "SpecPrefill")},
        comparison=ComparisonBar(),
        compare_caption=compare_caption,
        kept_view=KeptTokenView(),
        answers=AnswerCompareView(),
        ab_tab=AbTab(),
        thread_view=ThreadView(),
        fill_status=fill_status,
        engine_status=EngineStatus(status_bar),
    )
