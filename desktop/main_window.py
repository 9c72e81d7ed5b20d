"""The main window: wires the sessions (engine, document, run) to the widgets.

It decides what is enabled and routes events; each widget draws its own part and
each session does its own work on worker threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QRect, QSettings, QSize, Qt
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.api import DefaultModelsError, Notice, PasswordError, RunFinished, SelectionMade
from engine.api import Document
from engine.api import ModelSettings, RunSettings
from engine.api import Case
from desktop.about import about_box
from desktop.ab_session import AbRequest, AbSession
from desktop.ab_tab import AbTab
from desktop.answer_diff import AnswerCompareView
from desktop.background_fill import BackgroundFill, FillStatus
from desktop.calibrate_action import (CALIBRATE_TEXT, CALIBRATE_TIP, CALIBRATED_NOTICE, CANCELLED_NOTICE,
                                      CalibrationSession)
from desktop.comparison_bar import ComparisonBar
from desktop.document_info import DocumentInfoBar
from desktop.doc_threads import ANSWERED, CANCELLED as EXCHANGE_CANCELLED, FAILED as EXCHANGE_FAILED
from desktop.doc_threads import DocumentThread, Exchange, ThreadBook
from desktop.document_paths import OPEN_FILE_FILTER, dropped_paths
from desktop.document_session import DocumentLoader, DocumentSession
from desktop.engine_host import EngineFactory, EngineHost, LoadPreparation, Prediction
from desktop.engine_status import EngineStatus
from desktop.error_banner import BannerAction, ErrorBanner, failure_text
from desktop.job_session import CANCELLED, FAILED, FINISHED
from desktop.kept_view import KeptTokenView
from desktop.load_dialog import JobProgressDialog, ModelLoadDialog
from desktop.question_bar import QuestionBar
from desktop.recent_menu import RecentMenu
from desktop.run_controls import RunControls
from desktop.run_pane import RunPane, stage_predictions
from desktop.run_session import RunRequest, RunSession
from desktop.settings_dialog import SettingsDialog
from desktop.settings_store import RunPreferences, SettingsStore
from desktop.thread_view import CLEAR_TEXT, CLEAR_TIP, ThreadView

log = logging.getLogger(__name__)

TAB_KEPT, TAB_ANSWERS, TAB_AB, TAB_THREAD = "kept", "answers", "ab", "thread"
TAB_ALIASES = {"kept": TAB_KEPT, "heatmap": TAB_KEPT, "answers": TAB_ANSWERS, "diff": TAB_ANSWERS, "ab": TAB_AB,
               "thread": TAB_THREAD}
OUTCOME_STATES = {FINISHED: ANSWERED, CANCELLED: EXCHANGE_CANCELLED, FAILED: EXCHANGE_FAILED}

FIRST_START_SIZE = QSize(1280, 720)  # fits a 1366x768 laptop screen with its panels
SCREEN_SHARE = 0.9  # or this share of a smaller screen's free area
# The lower tabs may shrink below their contents' minimum (they clip; the splitter gives the room
# back), else the A/B tab alone keeps the window taller than a 768-pixel screen.
TABS_MIN_HEIGHT = 130


def first_start_size(available: QRect | None) -> QSize:
    """The window's size before any was remembered: 1280x720, or 90% of a smaller screen."""
    if available is None or available.isEmpty():
        return FIRST_START_SIZE
    fit = QSize(int(available.width() * SCREEN_SHARE), int(available.height() * SCREEN_SHARE))
    return FIRST_START_SIZE.boundedTo(fit)


# ask_password(parent, path, wrong_before) -> password, or None when the user gives up
PasswordPrompt = Callable[[QWidget, str, bool], "str | None"]


def ask_password_dialog(parent: QWidget, path: str, wrong_before: bool) -> str | None:
    prompt = "The password was wrong. Try again:" if wrong_before else "This PDF is encrypted. Password:"
    text, ok = QInputDialog.getText(parent, f"Password for {Path(path).name}", prompt, QLineEdit.EchoMode.Password)
    return text if ok else None


class MainWindow(QMainWindow):
    def __init__(
        self,
        engine_factory: EngineFactory,
        *,
        loader: DocumentLoader,
        settings: QSettings,
        ask_password: PasswordPrompt = ask_password_dialog,
        assemble_models: LoadPreparation | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("SpecPrefill document analyzer")
        self.setAcceptDrops(True)
        self.store = SettingsStore(settings)
        self.host = EngineHost(engine_factory, self)
        self.documents = DocumentSession(loader, self.host, self)
        self.runs = RunSession(self.host, self)
        self.ab = AbSession(self.host, self)
        self.calibration = CalibrationSession(self.host, self)
        self.threads = ThreadBook()  # each document's questions, answers and engine session
        self.thread: DocumentThread | None = None  # the active document's
        self.fill = BackgroundFill(self.host, self)
        self._asking: tuple[DocumentThread, Exchange] | None = None  # the question the run answers
        self._begun_runs: set[str] = set()  # the panes the current run has started
        self._ask_password = ask_password
        self._assemble_models = assemble_models  # offered when the default models are missing or corrupt
        self._load_dialog: ModelLoadDialog | None = None
        self._calibration_dialog: JobProgressDialog | None = None
        self._pane_context: dict[str, tuple[Document, str]] = {}
        self._run_prediction: Prediction | None = None  # the cost model's, for the current run's ETAs
        self._remember_layout = False  # on once restore_layout ran: screenshots and tests leave QSettings alone

        self._create_widgets()
        self._create_actions()
        self._build_layout()
        self._connect()
        self._restore_ui_state()
        self._refresh_controls()

    # --- construction ------------------------------------------------------------------------

    def _create_widgets(self) -> None:
        self.banner = ErrorBanner()
        self.doc_info = DocumentInfoBar()
        self.question = QuestionBar()
        self.controls = RunControls()
        self.baseline_pane = RunPane("baseline", "Full prefill")
        self.spec_pane = RunPane("spec", "SpecPrefill")
        self.panes = {"baseline": self.baseline_pane, "spec": self.spec_pane}
        self.comparison = ComparisonBar()
        self.kept_view = KeptTokenView()
        self.answers = AnswerCompareView()
        self.ab_tab = AbTab()
        self.thread_view = ThreadView()
        self.compare_caption = QLabel("")  # says what a compare on a follow-up compares
        self.compare_caption.setObjectName("compareCaption")
        self.compare_caption.setStyleSheet("font-style: italic;")
        self.compare_caption.hide()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.kept_view, "Kept tokens")
        self.tabs.addTab(self.answers, "Answers")
        self.tabs.addTab(self.ab_tab, "A/B test")
        self.tabs.addTab(self.thread_view, "Thread")
        self.tabs.setMinimumHeight(TABS_MIN_HEIGHT)
        self.fill_status = FillStatus()
        self.statusBar().addPermanentWidget(self.fill_status)
        self.engine_status = EngineStatus(self.statusBar())

    def _create_actions(self) -> None:
        self.open_file_action = QAction("&Open File…", self, shortcut=QKeySequence.StandardKey.Open)
        self.open_file_action.triggered.connect(self.open_file_dialog)
        self.open_folder_action = QAction("Open &Folder…", self, shortcut=QKeySequence("Ctrl+Shift+O"))
        self.open_folder_action.triggered.connect(self.open_folder_dialog)
        self.recent_menu = RecentMenu(self.store, self)
        self.recent_menu.pathChosen.connect(self.open_recent)
        self.settings_action = QAction("&Settings…", self, shortcut=QKeySequence("Ctrl+,"))
        self.settings_action.triggered.connect(self.open_settings)
        self.reload_action = QAction("&Reload Models", self)
        self.reload_action.triggered.connect(self.load_models)
        self.calibrate_action = QAction(CALIBRATE_TEXT, self, toolTip=CALIBRATE_TIP, statusTip=CALIBRATE_TIP)
        self.calibrate_action.triggered.connect(self.start_calibration)
        self.clear_thread_action = QAction(CLEAR_TEXT, self, toolTip=CLEAR_TIP, statusTip=CLEAR_TIP)
        self.clear_thread_action.triggered.connect(self.clear_thread)
        self.about_action = QAction("&About SpecPrefill", self)
        self.about_action.triggered.connect(self.show_about)
        quit_action = QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)

        file_menu = self.menuBar().addMenu("&File")
        file_menu.addAction(self.open_file_action)
        file_menu.addAction(self.open_folder_action)
        file_menu.addMenu(self.recent_menu)
        file_menu.addSeparator()
        file_menu.addAction(self.clear_thread_action)
        file_menu.addSeparator()
        file_menu.addAction(quit_action)
        models_menu = self.menuBar().addMenu("&Models")
        models_menu.addAction(self.settings_action)
        models_menu.addAction(self.reload_action)
        models_menu.addAction(self.calibrate_action)
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(self.about_action)
        toolbar = self.addToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setMovable(False)
        for action in (self.open_file_action, self.open_folder_action, self.settings_action):
            toolbar.addAction(action)

    def _build_layout(self) -> None:
        panes = self.pane_area = QWidget()  # both runs and their comparison
        pane_row = QHBoxLayout()
        pane_row.addWidget(self.baseline_pane)
        pane_row.addWidget(self.spec_pane)
        pane_column = QVBoxLayout(panes)
        pane_column.setContentsMargins(0, 0, 0, 0)
        pane_column.addWidget(self.compare_caption)
        pane_column.addLayout(pane_row, 1)
        pane_column.addWidget(self.comparison)

        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.setObjectName("mainSplitter")  # the window remembers its position by this name
        splitter.addWidget(panes)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([380, 360])  # the kept-token view deserves as much room as the answers

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(self.banner)
        layout.addWidget(self.doc_info)
        layout.addWidget(self.question)
        layout.addWidget(self.controls)
        layout.addWidget(splitter, 1)
        self.setCentralWidget(central)

    def _connect(self) -> None:
        self.host.loadStarted.connect(self._on_engine_loading)
        self.host.loadProgress.connect(self._on_engine_progress)
        self.host.ready.connect(self._on_engine_ready)
        self.host.loadFailed.connect(self._on_engine_failed)
        self.host.loadCancelled.connect(self._on_engine_cancelled)
        self.documents.loadStarted.connect(self._on_document_loading)
        self.documents.progress.connect(self.doc_info.show_progress)
        self.documents.loaded.connect(self._on_document_loaded)
        self.documents.failed.connect(self._on_document_failed)
        self.documents.cancelled.connect(self._on_document_cancelled)
        self.documents.tokensCounted.connect(self._on_tokens_counted)
        self.documents.tokenCountFailed.connect(self._on_token_count_failed)
        self.runs.started.connect(self._on_run_started)
        self.runs.event.connect(self._on_run_event)
        self.runs.ended.connect(self._on_run_ended)
        self.question.changed.connect(lambda _text: self._refresh_controls())
        self.question.changed.connect(lambda _text: self._refresh_ab_context())
        self.question.submitted.connect(lambda: self.start_run("both"))
        self.controls.runRequested.connect(self.start_run)
        self.controls.cancelRequested.connect(self.cancel)
        self.controls.keepChanged.connect(self.store.save_keep_percent)
        self.controls.keepChanged.connect(lambda _percent: self._refresh_prediction())
        self.controls.keepAutoChanged.connect(self.store.save_keep_auto)
        self.controls.keepAutoChanged.connect(lambda _auto: self._refresh_prediction())
        self.controls.positions.currentIndexChanged.connect(
            lambda _i: self.store.save_position_mode(self.controls.position_mode)
        )
        self.comparison.compareAnswersRequested.connect(self._show_answer_diff)
        self.comparison.toggleAnswerRequested.connect(self._toggle_answer)
        self.thread_view.clearRequested.connect(self.clear_thread)
        self.fill.changed.connect(self._on_fill_changed)
        self.ab_tab.runRequested.connect(self.start_ab)
        self.ab_tab.cancelRequested.connect(self.ab.cancel)
        self.ab.started.connect(self._on_ab_started)
        self.ab.progress.connect(self.ab_tab.show_progress)
        self.ab.row.connect(self.ab_tab.add_row)
        self.ab.ended.connect(self._on_ab_ended)
        self.calibration.started.connect(self._on_calibration_started)
        self.calibration.progress.connect(self._on_calibration_progress)
        self.calibration.ended.connect(self._on_calibration_ended)
        for pane in self.panes.values():
            pane.markdownToggled.connect(self.set_answer_markdown)
            pane.saveFailed.connect(self.banner.show_error)

    def _restore_ui_state(self) -> None:
        self.controls.set_keep_percent(self.store.keep_percent())
        self.controls.set_keep_auto(self.store.keep_auto())
        self.controls.set_position_mode(self.store.position_mode())
        for pane in self.panes.values():
            pane.set_markdown(self.store.answer_markdown())

    def restore_layout(self) -> None:
        """The size, position and splitters of the last session (else a size that fits the screen);
        from now on closing the window remembers them. The app calls this; screenshots don't."""
        geometry = self.store.window_geometry()
        if geometry is None or not self.restoreGeometry(geometry):
            screen = self.screen()
            self.resize(first_start_size(screen.availableGeometry() if screen else None))
        for splitter in self._named_splitters():
            state = self.store.splitter_state(splitter.objectName())
            if state is not None:
                splitter.restoreState(state)
        self._remember_layout = True

    def _save_layout(self) -> None:
        splitters = {splitter.objectName(): splitter.saveState() for splitter in self._named_splitters()}
        self.store.save_layout(self.saveGeometry(), splitters)

    def _named_splitters(self) -> list[QSplitter]:
        return [splitter for splitter in self.findChildren(QSplitter) if splitter.objectName()]

    # --- public actions ------------------------------------------------------------------------

    def start(self) -> None:
        """Begin loading the models; call once the window is shown."""
        self.load_models()

    def load_models(self) -> None:
        self._stop_engine_jobs()
        self.host.load(self.store.model_settings())

    def reassemble_models(self) -> None:
        """Re-assemble the default models (progress in the load dialog), then load them."""
        if self._assemble_models is None:
            return
        self._stop_engine_jobs()
        self.host.load(self.store.model_settings(), prepare=self._assemble_models)

    def _stop_engine_jobs(self) -> None:
        """A reload (or closing) queues behind the job on the engine thread: stop it first."""
        self.runs.cancel()
        self.ab.cancel()
        self.calibration.cancel()
        self.fill.cancel()

    def open_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a document", self._dialog_dir(), OPEN_FILE_FILTER)
        if path:
            self.open_path(path)

    def open_folder_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a code folder", self._dialog_dir())
        if path:
            self.open_path(path)

    def open_recent(self, path: str) -> None:
        if not Path(path).exists():
            self.store.remove_recent(path)
            self.banner.show_error(f"{path} no longer exists; it was removed from the recent list.")
            return
        self.open_path(path)

    def open_path(self, path: str) -> bool:
        if self.runs.is_active:
            self.banner.show_info("A run is in progress: wait for it or cancel it before opening another document.")
            return False
        self.documents.load(path)
        return True

    def start_run(self, mode: str) -> bool:
        reason = self._why_cannot_run()
        if reason is not None:
            log.info("run refused: %s", reason)
            return False
        thread = self.thread
        request = RunRequest(self.documents.document, self.question.question, mode, self._run_settings(),
                             session=thread.session if thread is not None else None)
        return self.runs.start(request)

    def start_ab(self, title: str, cases: list[Case], keeps: list[str]) -> bool:
        """Run an A/B suite with the window's run settings (each SpecPrefill run sets its own keep)."""
        reason = self._why_engine_busy()
        if reason is not None:
            log.info("A/B run refused: %s", reason)
            return False
        return self.ab.start(self.ab_tab.request(title, cases, keeps, self._run_settings()))

    def start_calibration(self) -> bool:
        """Models ▸ Calibrate This Machine…: time the loaded models on the engine thread, with progress."""
        reason = self._why_engine_busy()
        if reason is not None:
            log.info("calibration refused: %s", reason)
            return False
        return self.calibration.start(self.host.settings)

    def cancel(self) -> None:
        if self.runs.is_active:
            for run in self.runs.request.runs:
                self.panes[run].mark_cancelling()
        self._stop_engine_jobs()
        self.documents.cancel()
        self.host.cancel_load()

    def open_settings(self) -> SettingsDialog:
        dialog = SettingsDialog(self.store.model_settings(), self.store.run_preferences(), self)
        dialog.accepted.connect(lambda: self.apply_settings(dialog.model_settings(), dialog.run_preferences()))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()  # window-modal but not a nested event loop: the app keeps running
        return dialog

    def apply_settings(self, model_settings: ModelSettings, run_prefs: RunPreferences) -> None:
        models_changed = model_settings != self.store.model_settings()
        self.store.save_model_settings(model_settings)
        self.store.save_run_preferences(run_prefs)
        self._apply_background_setting(run_prefs.background_prefill)
        if models_changed:
            log.info("model settings changed: reloading the engine")
            self.load_models()
        else:
            self._refresh_prediction()  # the threshold may have changed

    def _apply_background_setting(self, on: bool) -> None:
        """Settings ▸ Background full prefill: off cancels a running fill; on may start one now."""
        if not on:
            self.fill.turn_off(self.thread)
            return
        self.fill.turn_on(self.thread)
        self._resume_fill()

    def clear_thread(self) -> bool:
        """One action: empty the document's thread and drop its caches (saved state on disk included)."""
        thread = self.thread
        if thread is None or self._why_cannot_clear() is not None:
            return False
        self.fill.cancel()
        thread.clear()
        self.thread_view.refresh()
        self.fill_status.show_state(thread.fill)
        self.compare_caption.hide()
        if self.host.is_ready:
            session = thread.session
            worker = self.host.submit("clearing the document's caches",
                                      lambda engine, ctx: engine.forget(session, saved=True))
            worker.failed.connect(lambda error: self.banner.show_error(
                f"Could not clear the caches: {failure_text(error, 'clearing the caches')}"))
        self.statusBar().showMessage(f"Cleared the thread and caches of {thread.name}", 5000)
        return True

    def show_about(self) -> QMessageBox:
        box = about_box(self, self.host.info)
        box.finished.connect(box.deleteLater)
        box.open()  # not exec: no nested event loop
        return box

    def set_answer_markdown(self, on: bool) -> None:
        """Both panes render Markdown or plain text together; the choice is remembered."""
        for pane in self.panes.values():
            pane.set_markdown(on)
        self.store.save_answer_markdown(on)

    def show_tab(self, name: str) -> None:
        widgets = {TAB_KEPT: self.kept_view, TAB_ANSWERS: self.answers, TAB_AB: self.ab_tab,
                   TAB_THREAD: self.thread_view}
        self.tabs.setCurrentWidget(widgets[TAB_ALIASES[name]])

    # --- state ---------------------------------------------------------------------------

    def _why_engine_busy(self) -> str | None:
        """Why no run or suite can start now, whatever the document: one engine job at a time."""
        if self.runs.is_active:
            return "A run is in progress"
        if self.ab.is_active:
            return "An A/B suite is running"
        if self.calibration.is_active:
            return "This machine is being calibrated"
        if self.host.is_loading:
            return "The models are loading"
        if not self.host.is_ready:
            return "The models are not loaded (Models ▸ Reload Models)"
        return None

    def _why_cannot_clear(self) -> str | None:
        """Clearing waits for a job on the engine thread: it would clear the caches the job uses."""
        if self.thread is None:
            return "Open a document first"
        if self.runs.is_active or self.ab.is_active or self.calibration.is_active:
            return self._why_engine_busy()
        return None

    def _why_cannot_run(self) -> str | None:
        busy = self._why_engine_busy()
        if busy is not None:
            return busy
        if self.documents.is_loading:
            return "The document is loading"
        if self.documents.document is None:
            return "Open a document first"
        if not self.question.question:
            return "Type a question or pick a preset"
        return None

    def _refresh_controls(self) -> None:
        reason = self._why_cannot_run()
        busy = self.runs.is_active
        cancellable = (busy or self.ab.is_active or self.calibration.is_active or self.documents.is_loading
                       or self.host.is_loading)
        self.controls.set_state(can_run=reason is None, cancellable=cancellable, reason=reason or "")
        engine_busy = self._why_engine_busy()
        self.ab_tab.set_state(can_run=engine_busy is None, running=self.ab.is_active, reason=engine_busy or "")
        self.calibrate_action.setEnabled(engine_busy is None)
        for action in (self.open_file_action, self.open_folder_action, self.recent_menu.menuAction()):
            action.setEnabled(not busy)
        can_clear = self._why_cannot_clear() is None
        self.clear_thread_action.setEnabled(can_clear)
        self.thread_view.set_clear_enabled(can_clear)

    def _run_settings(self) -> RunSettings:
        return self.store.run_preferences().run_settings(self.controls.keep, self.controls.position_mode)

    def _predict(self, settings: RunSettings) -> Prediction | None:
        """The prediction for the open document with `settings`; None before its tokens are counted."""
        tokens = self.documents.tokens
        return self.host.predict(tokens, settings) if tokens is not None else None

    def _refresh_prediction(self) -> None:
        self.doc_info.show_prediction(self._predict(self._run_settings()))

    def _dialog_dir(self) -> str:
        recent = self.store.recent_files()
        return str(Path(recent[0]).parent) if recent else str(Path.home())

    # --- engine ----------------------------------------------------------------------------

    def _on_engine_loading(self) -> None:
        self.engine_status.show_loading()
        self.doc_info.show_prediction(None)  # the old engine's calibration no longer applies
        self._close_load_dialog()
        self._load_dialog = ModelLoadDialog(self)
        self._load_dialog.canceled.connect(self.host.cancel_load)
        self._load_dialog.show()
        self._refresh_controls()

    def _on_engine_progress(self, done: int, total: int, label: str) -> None:
        if self._load_dialog is not None:
            self._load_dialog.report(done, total, label)

    def _on_engine_ready(self, info: object) -> None:
        self._close_load_dialog()
        self.threads.engine_replaced()
        self.fill_status.show_state(self.thread.fill if self.thread is not None else None)
        self.engine_status.show_info(info)
        self.controls.set_restore_supported(bool(info.positions_supported))
        if self.documents.document is not None:
            self.doc_info.show_counting()
            self.documents.count_tokens()
        self._refresh_controls()

    def _on_engine_failed(self, error: Exception) -> None:
        self._close_load_dialog()
        self.engine_status.show_unloaded("failed to load")
        message = failure_text(error, "model loading")
        self.banner.show_error(f"Could not load the models: {message}", action=self._repair_offer(error))
        self._refresh_controls()

    def _repair_offer(self, error: Exception) -> BannerAction | None:
        """A missing or corrupt default model is the one load failure the app repairs itself."""
        if isinstance(error, DefaultModelsError) and self._assemble_models is not None:
            return ("Re-assemble default models", self.reassemble_models)
        return None

    def _on_engine_cancelled(self) -> None:
        self._close_load_dialog()
        self.engine_status.show_unloaded("not loaded")
        self.banner.show_info("Model loading was cancelled. Use Models ▸ Reload Models to try again.")
        self._refresh_controls()

    def _close_load_dialog(self) -> None:
        if self._load_dialog is not None:
            self._load_dialog.finish()
            self._load_dialog = None

    # --- calibration ---------------------------------------------------------------------------

    def _on_calibration_started(self, _settings: ModelSettings) -> None:
        self.banner.dismiss()
        self._calibration_dialog = JobProgressDialog("Calibrating this machine", "Preparing the calibration…", self)
        self._calibration_dialog.canceled.connect(self._cancel_calibration)
        self._calibration_dialog.show()
        self._refresh_controls()

    def _cancel_calibration(self) -> None:
        """The dialog's Cancel: the dialog hides at once; the timing stops at its next check."""
        self.calibration.cancel()
        self.statusBar().showMessage("Cancelling the calibration…")

    def _on_calibration_progress(self, done: int, total: int, label: str) -> None:
        if self._calibration_dialog is not None:
            self._calibration_dialog.report(done, total, label)

    def _on_calibration_ended(self, outcome: str, message: str) -> None:
        self._close_calibration_dialog()
        if outcome == FINISHED:
            self._refresh_prediction()  # the engine has the new cost model
            self.banner.show_info(CALIBRATED_NOTICE)
        elif outcome == FAILED:
            self.banner.show_error(f"Calibration failed: {message}")
        elif outcome == CANCELLED:
            self.statusBar().showMessage(CANCELLED_NOTICE, 5000)
        self._refresh_controls()
        self._resume_fill()

    def _close_calibration_dialog(self) -> None:
        if self._calibration_dialog is not None:
            self._calibration_dialog.finish()
            self._calibration_dialog = None

    # --- document ----------------------------------------------------------------------------

    def _on_document_loading(self, path: str) -> None:
        self.doc_info.show_loading(path)
        self._refresh_controls()

    def _on_document_loaded(self, document: Document) -> None:
        self.fill.cancel()  # the fill works on the active document only
        self.thread = self.threads.open(document)
        self.thread_view.show_thread(self.thread)
        self.fill_status.show_state(self.thread.fill)
        self.compare_caption.hide()
        self.doc_info.show_document(document)
        if self.host.is_ready:
            self.doc_info.show_counting()
        self.kept_view.set_document(document)
        self.store.add_recent(str(document.path))
        self._refresh_ab_context()
        self._refresh_controls()

    def _on_document_failed(self, path: str, error: Exception, password_given: bool) -> None:
        if isinstance(error, PasswordError):
            password = self._ask_password(self, path, password_given)  # given before: it was wrong
            if password is not None:
                self.documents.load(path, password=password)
                return
        message = failure_text(error, f"loading {path}")
        self.doc_info.show_failed(path, message)
        self.banner.show_error(message)
        self._refresh_controls()

    def _on_document_cancelled(self, path: str) -> None:
        self.doc_info.show_cancelled(path)
        self._refresh_controls()

    def _on_tokens_counted(self, document: Document, tokens: int) -> None:
        self.doc_info.show_token_count(tokens)
        self._refresh_prediction()

    def _on_token_count_failed(self, error: Exception) -> None:
        self.banner.show_error(f"Could not count the document's tokens: {failure_text(error, 'token count')}")

    # --- runs ----------------------------------------------------------------------------

    def _on_run_started(self, request: RunRequest) -> None:
        self.banner.dismiss()
        self._begun_runs = set()
        # Taken once, at the start: mode "auto" begins its pane at the run's first event.
        self._run_prediction = self._predict(request.settings)
        for index, run in enumerate(request.runs):
            self._begin_pane(request, run, waiting_for="full prefill" if index > 0 else None)
        thread = self.thread
        self._asking = (thread, thread.ask(request.question, request.mode)) if thread is not None else None
        self.thread_view.refresh()
        self.compare_caption.hide()
        self._update_comparison()
        self._refresh_controls()

    def _begin_pane(self, request: RunRequest, run: str, waiting_for: str | None = None) -> None:
        """Clear `run`'s pane for this request: at the start, or (mode "auto") at the run's first event."""
        self._begun_runs.add(run)
        self.panes[run].begin(request.settings.max_new_tokens, waiting_for=waiting_for, question=request.question,
                              document_name=Path(request.document.path).name,
                              stage_seconds=self._stage_seconds(run))
        self._pane_context[run] = (request.document, request.question)
        if run == "spec":
            self.kept_view.clear_selection()  # the old selection does not describe this run

    def _stage_seconds(self, run: str) -> dict[str, float] | None:
        """The cost model's time for `run`'s long stages, so its pane can say about how long is left."""
        prediction = self._run_prediction
        if prediction is None:
            return None
        return stage_predictions(run, prediction.estimate, bypassed=bool(prediction.bypass_reason))

    def _on_run_event(self, event: object) -> None:
        run = getattr(event, "run", None)
        if isinstance(event, Notice) and run is None:
            self.banner.show_info(event.message)
            return
        pane = self.panes.get(run)
        if pane is not None and run not in self._begun_runs:
            self._begin_pane(self.runs.request, run)
        if pane is not None:
            pane.apply(event)
        if isinstance(event, SelectionMade):
            self.kept_view.set_selection(self.runs.request.document, event.selection)
        elif isinstance(event, RunFinished):
            self._record_answer(event.result)
            self._update_comparison()

    def _record_answer(self, result) -> None:
        """Into the thread it was asked in (still that one, even if another document opened since)."""
        if self._asking is None:
            return
        thread, exchange = self._asking
        exchange.answers.append(result)
        if thread is self.thread:
            self.thread_view.refresh()
            self.compare_caption.setText(exchange.caption)
            self.compare_caption.setVisible(bool(exchange.caption))

    def _on_run_ended(self, outcome: str, message: str) -> None:
        for run in self._begun_runs:
            if outcome == CANCELLED:
                self.panes[run].mark_cancelled()
            elif outcome == FAILED:
                self.panes[run].mark_failed(message)
        if outcome == FAILED:
            self.banner.show_error(message)
        elif outcome == CANCELLED:
            self.statusBar().showMessage("Run cancelled", 5000)
        self._end_exchange(outcome, message)
        self._refresh_controls()
        self._resume_fill()

    def _end_exchange(self, outcome: str, message: str) -> None:
        if self._asking is None:
            return
        thread, exchange = self._asking
        exchange.state, exchange.message = OUTCOME_STATES[outcome], message
        self._asking = None
        if thread is self.thread:
            self.thread_view.refresh()

    # --- the background fill ---------------------------------------------------------------------

    def _resume_fill(self) -> None:
        """Idle again: fill the active document in the background if a SpecPrefill answer made it
        worth it, or resume a paused fill (the engine goes on from where it stopped)."""
        if self.thread is None or self._why_engine_busy() is not None or self.fill.is_active:
            return
        self.fill.after_answer(self.thread, self._run_settings())

    def _on_fill_changed(self, thread: DocumentThread) -> None:
        if thread is self.thread:
            self.fill_status.show_state(thread.fill)

    # --- A/B suites ------------------------------------------------------------------------------

    def _refresh_ab_context(self) -> None:
        document = self.documents.document
        self.ab_tab.set_current(document.path if document is not None else None, self.question.question)

    def _on_ab_started(self, request: AbRequest) -> None:
        self.ab_tab.begin(request)
        self._refresh_controls()

    def _on_ab_ended(self, outcome: str, message: str) -> None:
        self.ab_tab.end(outcome, message, self.ab.request, self.ab.outcome)
        if outcome == CANCELLED:
            self.statusBar().showMessage("A/B suite cancelled", 5000)
        self._refresh_controls()
        self._resume_fill()

    def _update_comparison(self) -> None:
        baseline, spec = self.baseline_pane.result, self.spec_pane.result
        comparable = (
            baseline is not None
            and spec is not None
            and self._same_context(self._pane_context.get("baseline"), self._pane_context.get("spec"))
        )
        self.comparison.show_results(baseline if comparable else None, spec if comparable else None)
        self.answers.set_answers(self.baseline_pane.answer_text, self.spec_pane.answer_text)

    @staticmethod
    def _same_context(a: tuple[Document, str] | None, b: tuple[Document, str] | None) -> bool:
        return a is not None and b is not None and a[0] is b[0] and a[1] == b[1]

    def _show_answer_diff(self) -> None:
        self.answers.set_mode("diff")
        self.show_tab(TAB_ANSWERS)

    def _toggle_answer(self) -> None:
        self.answers.toggle()
        self.show_tab(TAB_ANSWERS)

    # --- drag and drop -------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_paths(event.mimeData()) and not self.runs.is_active:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        self.dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        paths = dropped_paths(event.mimeData())
        if not paths:
            event.ignore()
            return
        if len(paths) > 1:
            self.statusBar().showMessage(f"Opened the first of {len(paths)} dropped items", 5000)
        if self.open_path(paths[0]):
            event.acceptProposedAction()

    # --- shutdown -------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._remember_layout:
            self._save_layout()  # before hiding: the geometry of a visible window
        self.hide()  # gone at once for the user, while the engine thread finishes its last call
        self._stop_engine_jobs()
        self._close_load_dialog()
        self._close_calibration_dialog()
        self.comparison.shutdown()
        self.documents.shutdown()
        self.host.shutdown()  # returns once no job runs, and only then frees the engine
        super().closeEvent(event)
