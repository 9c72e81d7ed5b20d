"""The engine's long jobs that show a progress dialog: loading the models and calibrating this machine."""

from __future__ import annotations

from desktop.model.failure_text import failure_text
from desktop.sessions.calibration_session import CALIBRATED_NOTICE, CANCELLED_NOTICE
from desktop.sessions.engine_host import LoadPreparation
from desktop.sessions.job_session import CANCELLED, FAILED, FINISHED
from desktop.widgets.error_banner import BannerAction
from desktop.widgets.load_dialog import JobProgressDialog, ModelLoadDialog
from desktop.window.parts import WindowHooks, WindowSessions, WindowViews
from engine.api import DefaultModelsError, ModelSettings


class EngineLoadFlow:
    """Loading the models: the load dialog, the status bar's model label, and what a failure offers."""

    def __init__(
        self,
        views: WindowViews,
        sessions: WindowSessions,
        hooks: WindowHooks,
        assemble_models: LoadPreparation | None,
    ) -> None:
        self._views, self._sessions, self._hooks = views, sessions, hooks
        self._assemble_models = assemble_models  # offered when the default models are missing or corrupt
        self.dialog: ModelLoadDialog | None = None
        host = sessions.host
        host.loadStarted.connect(self._on_loading)
        host.loadProgress.connect(self._on_progress)
        host.ready.connect(self._on_ready)
        host.loadFailed.connect(self._on_failed)
        host.loadCancelled.connect(self._on_cancelled)

    @property
    def can_reassemble(self) -> bool:
        return self._assemble_models is not None

    def load(self, *, reassemble: bool = False) -> None:
        host, store = self._sessions.host, self._sessions.store
        if reassemble:
            host.load(store.model_settings(), prepare=self._assemble_models)
        else:
            host.load(store.model_settings())

    def close_dialog(self) -> None:
        if self.dialog is not None:
            self.dialog.finish()
            self.dialog = None

    def _on_loading(self) -> None:
        views = self._views
        views.engine_status.show_loading()
        views.doc_info.show_prediction(None)  # the old engine's calibration no longer applies
        self.close_dialog()
        self.dialog = ModelLoadDialog(views.dialog_parent)
        self.dialog.canceled.connect(self._sessions.host.cancel_load)
        self.dialog.show()
        self._hooks.apply_enablement()

    def _on_progress(self, done: int, total: int, label: str) -> None:
        if self.dialog is not None:
            self.dialog.report(done, total, label)

    def _on_ready(self, info: object) -> None:
        views, sessions = self._views, self._sessions
        self.close_dialog()
        sessions.threads.engine_replaced()
        thread = sessions.threads.active
        views.fill_status.show_state(thread.fill if thread is not None else None)
        views.engine_status.show_info(info)
        views.controls.set_restore_supported(bool(info.positions_supported))
        if sessions.documents.document is not None:
            views.doc_info.show_counting()
            sessions.documents.count_tokens()
        self._hooks.apply_enablement()

    def _on_failed(self, error: Exception) -> None:
        self.close_dialog()
        self._views.engine_status.show_unloaded("failed to load")
        message = failure_text(error, "model loading")
        self._views.banner.show_error(
            f"Could not load the models: {message}", action=self._repair_offer(error)
        )
        self._hooks.apply_enablement()

    def _repair_offer(self, error: Exception) -> BannerAction | None:
        """A missing or corrupt default model is the one load failure the app repairs itself."""
        if isinstance(error, DefaultModelsError) and self._assemble_models is not None:
            return ("Re-assemble default models", self._hooks.reassemble_models)
        return None

    def _on_cancelled(self) -> None:
        self.close_dialog()
        self._views.engine_status.show_unloaded("not loaded")
        self._views.banner.show_info("Model loading was cancelled. Use Models ▸ Reload Models to try again.")
        self._hooks.apply_enablement()


class CalibrationFlow:
    """Models ▸ Calibrate This Machine…: its progress dialog and how it ends."""

    def __init__(self, views: WindowViews, sessions: WindowSessions, hooks: WindowHooks) -> None:
        self._views, self._hooks = views, hooks
        self._calibration = calibration = sessions.calibration
        self.dialog: JobProgressDialog | None = None
        calibration.started.connect(self._on_started)
        calibration.progress.connect(self._on_progress)
        calibration.ended.connect(self._on_ended)

    def close_dialog(self) -> None:
        if self.dialog is not None:
            self.dialog.finish()
            self.dialog = None

    def _on_started(self, _settings: ModelSettings) -> None:
        self._views.banner.dismiss()
        parent = self._views.dialog_parent
        self.dialog = JobProgressDialog("Calibrating this machine", "Preparing the calibration…", parent)
        self.dialog.canceled.connect(self._cancel)
        self.dialog.show()
        self._hooks.apply_enablement()

    def _cancel(self) -> None:
        """The dialog's Cancel: the dialog hides at once; the timing stops at its next check."""
        self._calibration.cancel()
        self._views.status_bar.showMessage("Cancelling the calibration…")

    def _on_progress(self, done: int, total: int, label: str) -> None:
        if self.dialog is not None:
            self.dialog.report(done, total, label)

    def _on_ended(self, outcome: str, message: str) -> None:
        views, hooks = self._views, self._hooks
        self.close_dialog()
        if outcome == FINISHED:
            hooks.refresh_prediction()  # the engine has the new cost model
            views.banner.show_info(CALIBRATED_NOTICE)
        elif outcome == FAILED:
            views.banner.show_error(f"Calibration failed: {message}")
        elif outcome == CANCELLED:
            views.status_bar.showMessage(CANCELLED_NOTICE, 5000)
        hooks.apply_enablement()
        hooks.resume_fill()
