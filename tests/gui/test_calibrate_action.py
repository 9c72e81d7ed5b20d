"""Models ▸ Calibrate This Machine…: the calibration runs on the engine thread with progress and Cancel,
refuses to overlap a run, and the prediction uses its figures as soon as it ends.

The engine is the GUI fake plus the three timing calls calibration makes; its timings cost what
FAKE_CALIBRATION says (1 ms per token of target prefill, 0.2 ms of draft scoring), so the
calibration it yields predicts exactly what test_prediction's calibrated fake predicts.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

import tests.gui.conftest as gui_conftest
from desktop.model.failure_text import failure_text
from desktop.widgets.document_info import NOT_CALIBRATED
from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import NotCalibratedError, RuntimeFailure
from engine.core.paths import calibration_path
from tests.gui.conftest import FakeEngine, wait, wait_run_done
from tests.gui.test_prediction import AT_20, open_counted

TIMINGS = 6  # the default lengths (1024, 4096, 8192), each timed on the target and the draft


class TimedFakeEngine(FakeEngine):
    timing_s = 0.01  # how long each timing takes; its waits poll Cancel, as the real timings do
    failure: Exception | None = None  # raised by the draft's first timing

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.timing_threads: list[threading.Thread] = []

    def sample_tokens(self, text: str, n_tokens: int, what: str = "sample") -> list[int]:
        return list(range(n_tokens))

    def time_prefill(self, tokens: list[int], cancel: CancelToken = NEVER, on_step=None) -> float:
        return self._timed(len(tokens) * 1e-3, cancel, on_step)

    def time_draft(
        self, tokens: list[int], settings=None, cancel: CancelToken = NEVER, on_step=None
    ) -> float:
        if self.failure is not None:
            raise self.failure
        return self._timed(len(tokens) * 2e-4, cancel, on_step)

    def _timed(self, seconds: float, cancel: CancelToken, on_step) -> float:
        """Two halves, reported as the real timings report their batches."""
        self.timing_threads.append(threading.current_thread())
        for half in (1, 2):
            wait(self.timing_s / 2, cancel)
            if on_step is not None:
                on_step(half, 2)
        return seconds


@pytest.fixture(autouse=True)
def timed_engines(monkeypatch, tmp_path):
    """The window's factory builds engines that can be timed; the calibration file goes to a temporary cache."""
    monkeypatch.setattr(gui_conftest, "FakeEngine", TimedFakeEngine)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def progress_seen(window) -> list[tuple[int, int, str]]:
    seen = []
    window.calibration.progress.connect(lambda done, total, label: seen.append((done, total, label)))
    return seen


def cancel_button(dialog) -> QPushButton:
    return next(button for button in dialog.findChildren(QPushButton) if button.text() == "Cancel")


def menu_texts(window) -> dict[str, list[str]]:
    return {
        menu.title().replace("&", ""): [a.text().replace("&", "") for a in menu.actions()]
        for menu in (action.menu() for action in window.menuBar().actions())
    }


def test_the_action_is_in_the_models_menu_and_the_hints_name_it(window):
    assert "Calibrate This Machine…" in menu_texts(window)["Models"]
    assert "Models ▸ Calibrate This Machine…" in NOT_CALIBRATED
    remedy = failure_text(NotCalibratedError("this machine is not calibrated yet"), "estimate")
    assert "Models ▸ Calibrate This Machine…" in remedy and "specprefill calibrate" in remedy


def test_calibrating_shows_progress_and_updates_the_prediction(
    window, qtbot, long_pdf, engine_factory, progress_seen, monkeypatch
):
    monkeypatch.setattr(TimedFakeEngine, "timing_s", 0.05)
    open_counted(window, qtbot, long_pdf)
    assert window.doc_info.prediction.text() == NOT_CALIBRATED
    window.calibrate_action.trigger()
    assert window.calibration.is_active
    dialog = window.calibration_flow.dialog
    assert dialog is not None and dialog.isVisible()
    qtbot.waitUntil(lambda: "draft's scoring of 1,024 tokens" in dialog.labelText(), timeout=3000)
    assert dialog.value() > 0

    qtbot.waitUntil(lambda: not window.calibration.is_active, timeout=5000)
    engine = engine_factory.engine
    assert len(engine.timing_threads) == TIMINGS
    assert threading.main_thread() not in engine.timing_threads  # the engine thread timed, not the GUI's
    dones = [done for done, _, _ in progress_seen]
    assert dones == sorted(dones) and dones[-1] == progress_seen[-1][1]
    assert progress_seen[-1][2] == "fitting the cost model"
    assert window.calibration_flow.dialog is None
    assert window.doc_info.prediction.text() == AT_20  # at once: no reload, no recount
    assert window.banner.kind == "info" and "calibrated" in window.banner.text
    assert Path(calibration_path()).is_file()
    assert window.calibrate_action.isEnabled()


def test_cancel_stops_the_calibration_and_stores_nothing(
    window, qtbot, long_pdf, engine_factory, progress_seen, monkeypatch
):
    monkeypatch.setattr(TimedFakeEngine, "timing_s", 0.5)
    open_counted(window, qtbot, long_pdf)
    window.calibrate_action.trigger()
    dialog = window.calibration_flow.dialog
    qtbot.waitUntil(
        lambda: len(engine_factory.engine.timing_threads) == 1, timeout=3000
    )  # inside the first timing
    qtbot.mouseClick(cancel_button(dialog), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.calibration.is_active, timeout=300)  # the timing's wait saw Cancel
    assert len(engine_factory.engine.timing_threads) == 1
    assert not Path(calibration_path()).exists()
    assert engine_factory.engine.cost_model is None
    assert window.doc_info.prediction.text() == NOT_CALIBRATED
    assert window.statusBar().currentMessage() == "Calibration cancelled: nothing was saved"
    assert window.calibration_flow.dialog is None and window.calibrate_action.isEnabled()
    assert window._why_engine_busy() is None


def test_calibration_and_runs_never_overlap(loaded_window, qtbot, fake_config, monkeypatch):
    window = loaded_window
    fake_config.token_s = 0.02
    window.start_run("baseline")  # one run: no answer agreement computed after it
    assert not window.calibrate_action.isEnabled()
    assert not window.start_calibration()
    wait_run_done(qtbot, window)
    assert window.calibrate_action.isEnabled()

    monkeypatch.setattr(TimedFakeEngine, "timing_s", 0.05)
    assert window.start_calibration()
    assert not window.calibrate_action.isEnabled()
    assert not any(button.isEnabled() for button in window.controls.run_buttons)
    assert window.controls.compare_button.toolTip() == "This machine is being calibrated"  # says why
    assert not window.start_run("both") and not window.runs.is_active
    qtbot.waitUntil(lambda: not window.calibration.is_active, timeout=5000)
    assert all(button.isEnabled() for button in window.controls.run_buttons)


def test_a_failed_calibration_shows_the_error_and_stores_nothing(window, qtbot, long_pdf, monkeypatch):
    monkeypatch.setattr(TimedFakeEngine, "failure", RuntimeFailure("llama_decode failed"))
    open_counted(window, qtbot, long_pdf)
    window.calibrate_action.trigger()
    qtbot.waitUntil(lambda: not window.calibration.is_active, timeout=3000)
    assert window.banner.kind == "error"
    assert window.banner.text.startswith("Calibration failed: llama_decode failed")
    assert not Path(calibration_path()).exists()
    assert window.doc_info.prediction.text() == NOT_CALIBRATED
    assert window.calibration_flow.dialog is None and window.calibrate_action.isEnabled()


def test_nothing_to_calibrate_until_the_models_are_loaded(make_window, qtbot, fake_config):
    fake_config.load_step_s = 0.05
    window = make_window(wait_ready=False)
    assert not window.calibrate_action.isEnabled()
    assert not window.start_calibration()
    qtbot.waitUntil(lambda: window.host.is_ready, timeout=3000)
    assert window.calibrate_action.isEnabled()


def test_a_reload_cancels_a_running_calibration(window, qtbot, engine_factory, monkeypatch):
    monkeypatch.setattr(TimedFakeEngine, "timing_s", 0.5)
    window.calibrate_action.trigger()
    first = engine_factory.engine
    window.reload_action.trigger()
    qtbot.waitUntil(lambda: window.host.is_ready and engine_factory.engine is not first, timeout=3000)
    assert not window.calibration.is_active and first.closed
    assert not Path(calibration_path()).exists()
