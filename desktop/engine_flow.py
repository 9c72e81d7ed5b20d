"""The engine's long jobs that show a progress dialog: loading the models and calibrating this machine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.calibrate_action import CALIBRATED_NOTICE, CANCELLED_NOTICE
from desktop.engine_host import LoadPreparation
from desktop.error_banner import BannerAction, failure_text
from desktop.job_session import CANCELLED, FAILED, FINISHED
from desktop.load_dialog import JobProgressDialog, ModelLoadDialog
from engine.api import DefaultModelsError, ModelSettings

if TYPE_CHECKING:
    from desktop.main_window import MainWindow


class EngineLoadFlow:
    """Loading the models: the load dialog, the status bar's model label, and what a failure offers."""

    def __init__(self, window: MainWindow, assemble_models: LoadPreparation | None) -> None:
        self._window = window
        self._assemble_models = assemble_models  # offered when the default models are missing or corrupt
        self.dialog: ModelLoadDialog | None = None
        host = window.host
        host.loadStarted.connect(self._on_loading)
        host.loadProgress.connect(self._on_progress)
        host.ready.connect(self._on_ready)
        host.loadFailed.connect(self._on_failed)
        host.loadCancelled.connect(self._on_cancelled)

    @property
    def can_reassemble(self) -> bool:
        return self._assemble_models is not None

    def load(self, *, reassemble: bool = False) -> None:
        window = self._window
        if reassemble:
            window.host.load(window.store.model_settings(), prepare=self._assemble_models)
        else:
            window.host.load(window.store.model_settings())

    def close_dialog(self) -> None:
        if self.dialog is not None:
            self.dialog.finish()
            self.dialog = None

    def _on_loading(self) -> None:
        window = self._window
        window.engine_status.show_loading()
        window.doc_info.show_prediction(None)  # the old engine's calibration no longer applies
        self.close_dialog()
        self.dialog = ModelLoadDialog(window)
        self.dialog.canceled.connect(window.host.cancel_load)
        self.dialog.show()
        window.apply_enablement()

    def _on_progress(self, done: int, total: int, label: str) -> None:
        if self.dialog is not None:
            self.dialog.report(done, total, label)

    def _on_ready(self, info: object) -> None:
        window = self._window
        self.close_dialog()
        window.threads.engine_replaced()
        window.fill_status.show_state(window.thread.fill if window.thread is not None else None)
        window.engine_status.show_info(info)
        window.controls.set_restore_supported(bool(info.positions_supported))
        if window.documents.document is not None:
            window.doc_info.show_counting()
            window.documents.count_tokens()
        window.apply_enablement()

    def _on_failed(self, error: Exception) -> None:
        window = self._window
        self.close_dialog()
        window.engine_status.show_unloaded("failed to load")
        message = failure_text(error, "model loading")
        window.banner.show_error(f"Could not load the models: {message}", action=self._repair_offer(error))
        window.apply_enablement()

    def _repair_offer(self, error: Exception) -> BannerAction | None:
        """A missing or corrupt default model is the one load failure the app repairs itself."""
        if isinstance(error, DefaultModelsError) and self._assemble_models is not None:
            return ("Re-assemble default models", self._window.reassemble_models)
        return None

    def _on_cancelled(self) -> None:
        window = self._window
        self.close_dialog()
        window.engine_status.show_unloaded("not loaded")
        window.banner.show_info("Model loading was cancelled. Use Models ▸ Reload Models to try again.")
        window.apply_enablement()


class CalibrationFlow:
    """Models ▸ Calibrate This Machine…: its progress dialog and how it ends."""

    def __init__(self, window: MainWindow) -> None:
        self._window = window
        self.dialog: JobProgressDialog | None = None
        calibration = window.calibration
        calibration.started.connect(self._on_started)
        calibration.progress.connect(self._on_progress)
        calibration.ended.connect(self._on_ended)

    def close_dialog(self) -> None:
        if self.dialog is not None:
            self.dialog.finish()
            self.dialog = None

    def _on_started(self, _settings: ModelSettings) -> None:
        window = self._window
        window.banner.dismiss()
        self.dialog = JobProgressDialog("Calibrating this machine", "Preparing the calibration…", window)
        self.dialog.canceled.connect(self._cancel)
        self.dialog.show()
        window.apply_enablement()

    def _cancel(self) -> None:
        """The dialog's Cancel: the dialog hides at once; the timing stops at its next check."""
        self._window.calibration.cancel()
        self._window.statusBar().showMessage("Cancelling the calibration…")

    def _on_progress(self, done: int, total: int, label: str) -> None:
        if self.dialog is not None:
            self.dialog.report(done, total, label)

    def _on_ended(self, outcome: str, message: str) -> None:
        window = self._window
        self.close_dialog()
        if outcome == FINISHED:
            window.refresh_prediction()  # the engine has the new cost model
            window.banner.show_info(CALIBRATED_NOTICE)
        elif outcome == FAILED:
            window.banner.show_error(f"Calibration failed: {message}")
        elif outcome == CANCELLED:
            window.statusBar().showMessage(CANCELLED_NOTICE, 5000)
        window.apply_enablement()
        window.resume_fill()
