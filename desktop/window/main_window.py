"""The main window: wires the sessions (engine, document, run) to the widgets.

What is enabled when is decided by desktop.model.view_state and applied here in one place; the flows
(desktop/window/*_flow.py) route each session's events, given the widgets, sessions and callbacks
they use (desktop.window.parts), never the window; each widget draws its own part and each session
does its own work on worker threads.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QSettings
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QMainWindow, QMessageBox, QWidget

from desktop.model.doc_threads import DocumentThread, ThreadBook
from desktop.model.prediction import Prediction
from desktop.model.preferences import RunPreferences
from desktop.model.view_state import Enablement, ViewState, enablement, why_engine_busy
from desktop.sessions.ab_session import AbSession
from desktop.sessions.background_fill import BackgroundFill
from desktop.sessions.calibration_session import CalibrationSession
from desktop.sessions.engine_host import EngineFactory, EngineHost, LoadPreparation
from desktop.sessions.open_document import DocumentLoader, OpenDocument
from desktop.sessions.run_session import RunRequest, RunSession
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.about import about_box
from desktop.widgets.model_picker import ModelPicker
from desktop.widgets.settings_dialog import SettingsDialog
from desktop.window.ab_flow import AbFlow
from desktop.window.actions import build_actions, fill_menus
from desktop.window.document_flow import DocumentFlow, PasswordPrompt, ask_password_dialog
from desktop.window.engine_flow import CalibrationFlow, EngineLoadFlow
from desktop.window.layout import LayoutMemory, build_layout, build_tabs, tab_widget
from desktop.window.parts import WindowHooks, WindowSessions, WindowViews, create_views
from desktop.window.run_flow import RunFlow
from desktop.window.thread_flow import ThreadFlow
from engine.api import Case, ModelSettings, RunSettings

log = logging.getLogger(__name__)


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
        self.documents = OpenDocument(loader, self.host, self)
        self.runs = RunSession(self.host, self)
        self.ab = AbSession(self.host, self)
        self.calibration = CalibrationSession(self.host, self)
        self.threads = ThreadBook()  # each document's questions, answers and engine session
        self.fill = BackgroundFill(self.host, self)
        self.layout_memory = LayoutMemory(self, self.store)

        views = self._create_widgets()
        self._create_actions()
        central, self.pane_area = build_layout(views, self.tabs)
        self.setCentralWidget(central)
        parts = (views, self._sessions(), self._hooks())
        self.engine_flow = EngineLoadFlow(*parts, assemble_models)
        self.document_flow = DocumentFlow(*parts, ask_password)
        self.run_flow = RunFlow(*parts)
        self.thread_flow = ThreadFlow(*parts)
        self.calibration_flow = CalibrationFlow(*parts)
        self.ab_flow = AbFlow(*parts)
        self._connect()
        self._restore_ui_state()
        self.apply_enablement()

    # --- construction ------------------------------------------------------------------------

    def _create_widgets(self) -> WindowViews:
        views = create_views(self, self.statusBar())
        self.banner = views.banner
        self.doc_info = views.doc_info
        self.question = views.question
        self.controls = views.controls
        self.panes = views.panes
        self.baseline_pane, self.spec_pane = views.panes["baseline"], views.panes["spec"]
        self.comparison = views.comparison
        self.compare_caption = views.compare_caption  # says what a compare on a follow-up compares
        self.kept_view = views.kept_view
        self.answers = views.answers
        self.ab_tab = views.ab_tab
        self.thread_view = views.thread_view
        self.fill_status = views.fill_status
        self.engine_status = views.engine_status
        self.tabs = build_tabs(self.kept_view, self.answers, self.ab_tab, self.thread_view)
        return views

    def _create_actions(self) -> None:
        actions = self.actions = build_actions(self, self.store)
        fill_menus(self.menuBar(), self.addToolBar("Main"), actions)
        actions.recent.pathChosen.connect(self.open_recent)
        for action, slot in [
            (actions.open_file, self.open_file_dialog),
            (actions.open_folder, self.open_folder_dialog),
            (actions.settings, self.open_settings),
            (actions.choose_models, self.open_model_picker),
            (actions.reload, self.load_models),
            (actions.calibrate, self.start_calibration),
            (actions.clear_thread, self.clear_thread),
            (actions.about, self.show_about),
            (actions.quit, self.close),
        ]:
            action.triggered.connect(slot)
        self.open_file_action, self.open_folder_action = actions.open_file, actions.open_folder
        self.recent_menu, self.settings_action, self.reload_action = (
            actions.recent,
            actions.settings,
            actions.reload,
        )
        self.calibrate_action, self.clear_thread_action = actions.calibrate, actions.clear_thread
        self.about_action = actions.about

    def _sessions(self) -> WindowSessions:
        return WindowSessions(
            store=self.store,
            host=self.host,
            documents=self.documents,
            runs=self.runs,
            ab=self.ab,
            calibration=self.calibration,
            fill=self.fill,
            threads=self.threads,
        )

    def _hooks(self) -> WindowHooks:
        return WindowHooks(
            enablement=self.enablement,
            apply_enablement=self.apply_enablement,
            resume_fill=self.resume_fill,
            run_settings=self.run_settings,
            predict=self.predict,
            refresh_prediction=self.refresh_prediction,
            refresh_ab_context=lambda: self.ab_flow.refresh_context(),
            show_tab=self.show_tab,
            reassemble_models=self.reassemble_models,
        )

    def _connect(self) -> None:
        self.ab_tab.runRequested.connect(self.start_ab)
        self.question.changed.connect(lambda _text: self.apply_enablement())
        self.question.changed.connect(lambda _text: self.ab_flow.refresh_context())
        self.question.submitted.connect(lambda: self.start_run("both"))
        self.controls.runRequested.connect(self.start_run)
        self.controls.cancelRequested.connect(self.cancel)
        self.controls.keepChanged.connect(self.store.save_keep_percent)
        self.controls.keepChanged.connect(lambda _percent: self.refresh_prediction())
        self.controls.keepAutoChanged.connect(self.store.save_keep_auto)
        self.controls.keepAutoChanged.connect(lambda _auto: self.refresh_prediction())
        self.controls.positions.currentIndexChanged.connect(
            lambda _i: self.store.save_position_mode(self.controls.position_mode)
        )
        self.thread_view.clearRequested.connect(self.clear_thread)
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
        self.layout_memory.restore()

    @property
    def thread(self) -> DocumentThread | None:
        """The active document's thread."""
        return self.threads.active

    # --- enablement ------------------------------------------------------------------------

    def view_state(self) -> ViewState:
        return ViewState(
            engine_ready=self.host.is_ready,
            engine_loading=self.host.is_loading,
            document_loaded=self.documents.document is not None,
            document_loading=self.documents.is_loading,
            thread_open=self.thread is not None,
            has_question=bool(self.question.question),
            run_active=self.runs.is_active,
            ab_active=self.ab.is_active,
            calibration_active=self.calibration.is_active,
            fill_active=self.fill.is_active,
        )

    def enablement(self) -> Enablement:
        return enablement(self.view_state())

    def apply_enablement(self) -> None:
        """The one place the window's controls are enabled or greyed out."""
        allowed = self.enablement()
        self.controls.set_state(can_run=allowed.run, cancellable=allowed.cancel, reason=allowed.run_reason)
        self.ab_tab.set_state(
            can_run=allowed.ab_run, running=allowed.ab_running, reason=allowed.engine_reason
        )
        self.calibrate_action.setEnabled(allowed.calibrate)
        for action in (self.open_file_action, self.open_folder_action, self.recent_menu.menuAction()):
            action.setEnabled(allowed.open_document)
        self.clear_thread_action.setEnabled(allowed.clear_thread)
        self.thread_view.set_clear_enabled(allowed.clear_thread)

    def _why_engine_busy(self) -> str | None:
        return why_engine_busy(self.view_state())

    # --- public actions ------------------------------------------------------------------------

    def start(self) -> None:
        """Begin loading the models; call once the window is shown."""
        self.load_models()

    def load_models(self) -> None:
        self._stop_engine_jobs()
        self.engine_flow.load()

    def reassemble_models(self) -> None:
        """Re-assemble the default models (progress in the load dialog), then load them."""
        if not self.engine_flow.can_reassemble:
            return
        self._stop_engine_jobs()
        self.engine_flow.load(reassemble=True)

    def _stop_engine_jobs(self) -> None:
        """A reload (or closing) queues behind the job on the engine thread: stop it first."""
        self.runs.cancel()
        self.ab.cancel()
        self.calibration.cancel()
        self.fill.cancel()

    def open_file_dialog(self) -> None:
        self.document_flow.open_file_dialog()

    def open_folder_dialog(self) -> None:
        self.document_flow.open_folder_dialog()

    def open_recent(self, path: str) -> None:
        self.document_flow.open_recent(path)

    def open_path(self, path: str) -> bool:
        return self.document_flow.open_path(path)

    def start_run(self, mode: str) -> bool:
        allowed = self.enablement()
        if not allowed.run:
            log.info("run refused: %s", allowed.run_reason)
            return False
        thread = self.thread
        request = RunRequest(
            self.documents.document,
            self.question.question,
            mode,
            self.run_settings(),
            session=thread.session if thread is not None else None,
        )
        return self.runs.start(request)

    def start_ab(self, title: str, cases: list[Case], keeps: list[str]) -> bool:
        """Run an A/B suite with the window's run settings (each SpecPrefill run sets its own keep)."""
        allowed = self.enablement()
        if not allowed.ab_run:
            log.info("A/B run refused: %s", allowed.engine_reason)
            return False
        return self.ab.start(self.ab_tab.request(title, cases, keeps, self.run_settings()))

    def start_calibration(self) -> bool:
        """Models ▸ Calibrate This Machine…: time the loaded models on the engine thread, with progress."""
        allowed = self.enablement()
        if not allowed.calibrate:
            log.info("calibration refused: %s", allowed.engine_reason)
            return False
        return self.calibration.start(self.host.settings)

    def cancel(self) -> None:
        self.run_flow.mark_cancelling()
        self._stop_engine_jobs()
        self.documents.cancel()
        self.host.cancel_load()

    def open_settings(self) -> SettingsDialog:
        dialog = SettingsDialog(self.store.model_settings(), self.store.run_preferences(), self)
        dialog.accepted.connect(
            lambda: self.apply_settings(dialog.model_settings(), dialog.run_preferences())
        )
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()  # window-modal but not a nested event loop: the app keeps running
        return dialog

    def open_model_picker(self) -> ModelPicker:
        dialog = ModelPicker(self.store.model_settings(), self)
        dialog.accepted.connect(
            lambda: self.apply_settings(dialog.model_settings(), self.store.run_preferences())
        )
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def apply_settings(self, model_settings: ModelSettings, run_prefs: RunPreferences) -> None:
        models_changed = model_settings != self.store.model_settings()
        self.store.save_model_settings(model_settings)
        self.store.save_run_preferences(run_prefs)
        self.thread_flow.apply_background_setting(run_prefs.background_prefill)
        if not run_prefs.read_ahead and self.fill.is_reading:
            self.fill.cancel()  # Settings ▸ Read ahead on open, turned off while it reads
        if models_changed:
            log.info("model settings changed: reloading the engine")
            self.load_models()
        else:
            self.refresh_prediction()  # the threshold may have changed

    def clear_thread(self) -> bool:
        return self.thread_flow.clear()

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
        self.tabs.setCurrentWidget(tab_widget(self.tabs, name))

    # --- settings and predictions ----------------------------------------------------------------

    def run_settings(self) -> RunSettings:
        return self.store.run_preferences().run_settings(self.controls.keep, self.controls.position_mode)

    def predict(self, settings: RunSettings) -> Prediction | None:
        """The prediction for the open document with `settings`; None before its tokens are counted."""
        tokens = self.documents.tokens
        return self.host.predict(tokens, settings) if tokens is not None else None

    def refresh_prediction(self) -> None:
        self.doc_info.show_prediction(self.predict(self.run_settings()))

    def resume_fill(self) -> None:
        self.thread_flow.resume_fill()

    # --- drag and drop -------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        self.document_flow.drag_entered(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        self.document_flow.drag_entered(event)

    def dropEvent(self, event: QDropEvent) -> None:
        self.document_flow.dropped(event)

    # --- shutdown -------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        self.layout_memory.save()  # before hiding: the geometry of a visible window
        self.hide()  # gone at once for the user, while the engine thread finishes its last call
        self._stop_engine_jobs()
        self.engine_flow.close_dialog()
        self.calibration_flow.close_dialog()
        self.comparison.shutdown()
        self.documents.shutdown()
        self.host.shutdown()  # returns once no job runs, and only then frees the engine
        super().closeEvent(event)
