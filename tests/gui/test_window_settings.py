"""Model loading (progress dialog, cancel, errors), the status bar, and the Settings dialog."""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QSettings, QTimer
from PySide6.QtWidgets import QDialogButtonBox, QPushButton

from desktop.model.preferences import RunPreferences
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.load_dialog import ModelLoadDialog
from engine.core.settings import ModelSettings, RunSettings
from engine.models import defaults as models


def test_status_bar_shows_models_positions_memory_and_device(window):
    status = window.engine_status
    assert status.models.text() == "Target: FakeTarget-1.5B  ·  Draft: FakeDraft-0.5B"
    assert status.positions.text() == "restore positions: supported"
    assert status.memory.text() == "Draft memory: 300.0 MB"
    assert status.device.text().startswith("Draft: cpu · Target: CPU · context")


def test_runtime_without_gapped_positions_means_renumber_only(make_window, fake_config):
    fake_config.positions_supported = False
    window = make_window()
    assert window.engine_status.positions.text() == "renumber only"
    combo = window.controls.positions
    restore = combo.findData("restore")
    assert not combo.model().item(restore).isEnabled()
    window.controls.set_position_mode("restore")
    assert window.controls.position_mode == "auto"


def test_first_load_shows_a_progress_dialog_and_never_freezes(make_window, qtbot, fake_config):
    # A load run on the GUI thread would stall it for the whole second; the 0.5 s bound leaves room
    # for a busy CI machine's own pauses (one of 0.37 s was seen) without letting that through.
    fake_config.load_steps, fake_config.load_step_s = 20, 0.05
    ticks = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start()
    ticks.append(time.monotonic())  # building and starting the window must not block either
    window = make_window(wait_ready=False)
    dialog = window.engine_flow.dialog
    assert dialog is not None and dialog.isVisible()
    assert window.engine_status.models.text() == "Models: loading…"
    assert not window.controls.compare_button.isEnabled()
    qtbot.waitUntil(lambda: "verifying fake models" in dialog.labelText(), timeout=2000)
    qtbot.waitUntil(lambda: window.host.is_ready, timeout=3000)
    timer.stop()
    assert window.engine_flow.dialog is None
    qtbot.waitUntil(lambda: not window.findChildren(ModelLoadDialog), timeout=1000)  # closed and deleted
    assert len(ticks) >= 40
    assert max(b - a for a, b in zip(ticks, ticks[1:])) < 0.5


def test_cancelling_the_load_leaves_a_usable_window_and_reload_works(make_window, qtbot, fake_config):
    fake_config.load_steps, fake_config.load_step_s = 50, 0.05
    window = make_window(wait_ready=False)
    qtbot.waitUntil(lambda: window.host.is_loading, timeout=1000)
    started = time.monotonic()
    cancel_button = next(
        b for b in window.engine_flow.dialog.findChildren(QPushButton) if b.text() == "Cancel"
    )
    cancel_button.click()
    qtbot.waitUntil(lambda: not window.host.is_loading, timeout=1000)
    assert time.monotonic() - started < 1.0
    assert window.banner.kind == "info" and "cancelled" in window.banner.text
    assert window.engine_status.models.text() == "Models: not loaded"
    fake_config.load_steps, fake_config.load_step_s = 2, 0.01
    window.reload_action.trigger()
    qtbot.waitUntil(lambda: window.host.is_ready, timeout=3000)
    assert window.engine_status.models.text().startswith("Target: FakeTarget")


def test_a_load_error_is_a_message(make_window, qtbot, fake_config):
    fake_config.load_error = "default target model is missing: run `make setup`"
    window = make_window(wait_ready=False)
    qtbot.waitUntil(lambda: window.banner.kind == "error", timeout=3000)
    assert (
        window.banner.text == "Could not load the models: default target model is missing: run `make setup`"
    )
    assert window.engine_status.models.text() == "Models: failed to load"
    assert not window.controls.compare_button.isEnabled()


def ok(dialog) -> None:
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()


def test_settings_dialog_saves_and_reloads_the_engine(window, qtbot, engine_factory, qsettings, tmp_path):
    first_engine = engine_factory.engine
    dialog = window.open_settings()
    assert dialog.isVisible()
    assert dialog.target.edit.text() == "" and models.TARGET.name in dialog.target.edit.placeholderText()
    assert dialog.draft.edit.text() == "" and models.DRAFT.name in dialog.draft.edit.placeholderText()
    assert dialog.model_settings().n_ctx == ModelSettings().n_ctx
    draft = tmp_path / "draft.gguf"
    dialog.draft.edit.setText(str(draft))
    dialog.device.setCurrentIndex(dialog.device.findData("cpu"))
    dialog.threads.setValue(4)
    dialog.context.setValue(8192)
    dialog.lookahead.setValue(6)
    dialog.chunk_size.setValue(64)
    dialog.draft_window.setValue(2048)
    ok(dialog)
    qtbot.waitUntil(lambda: len(engine_factory.built) == 2 and window.host.is_ready, timeout=3000)
    assert first_engine.closed
    loaded_with = engine_factory.settings_seen[-1]
    assert (loaded_with.draft_path, loaded_with.device, loaded_with.n_threads, loaded_with.n_ctx) == (
        draft,
        "cpu",
        4,
        8192,
    )
    assert loaded_with.target_path is None
    # Persisted: a fresh store over the same file reads the same values.
    reread = SettingsStore(QSettings(qsettings.fileName(), QSettings.Format.IniFormat))
    assert reread.model_settings() == loaded_with
    assert reread.run_preferences() == RunPreferences(chunk_size=64, lookahead=6, draft_window=2048)


def test_restore_defaults_resets_every_field(window, qtbot, engine_factory):
    window.store.save_model_settings(
        ModelSettings(
            target_path=Path("/m/t.gguf"), device="cuda", n_threads=3, n_ctx=4096, draft_quant="none"
        )
    )
    window.store.save_run_preferences(
        RunPreferences(chunk_size=8, lookahead=2, max_new_tokens=32, min_tokens=0, draft_window=0)
    )
    dialog = window.open_settings()
    assert dialog.draft_window.text() == "Full attention"
    assert dialog.target.edit.text() == "/m/t.gguf" and dialog.device.currentData() == "cuda"
    assert dialog.draft_precision.currentData() == "none"
    assert (dialog.threshold.value, dialog.max_new_tokens.value()) == (0, 32)
    dialog.restore_button.click()
    defaults = ModelSettings()
    assert dialog.target.edit.text() == ""
    assert dialog.device.currentData() == defaults.device
    assert dialog.draft_precision.currentData() == "auto" == defaults.draft_quant
    assert dialog.threads.value() == 0 and dialog.threads.text() == "Auto (physical cores)"
    assert dialog.model_settings().n_ctx == defaults.n_ctx
    assert (dialog.chunk_size.value(), dialog.lookahead.value()) == (
        RunPreferences().chunk_size,
        RunPreferences().lookahead,
    )
    assert dialog.draft_window.value() == RunSettings().draft_window == 4096
    assert dialog.threshold.automatic.isChecked() and not dialog.threshold.tokens.isEnabled()
    assert dialog.threshold.value is None
    assert dialog.max_new_tokens.value() == 256
    ok(dialog)
    assert window.store.model_settings() == defaults
    assert window.store.run_preferences() == RunPreferences()
    qtbot.waitUntil(lambda: len(engine_factory.built) == 2 and window.host.is_ready, timeout=3000)


def test_cancelling_the_dialog_changes_nothing(window, qtbot, engine_factory):
    dialog = window.open_settings()
    dialog.context.setValue(2048)
    dialog.reject()
    qtbot.wait(50)
    assert window.store.model_settings().n_ctx == ModelSettings().n_ctx
    assert len(engine_factory.built) == 1


def test_run_only_settings_do_not_reload_the_models(window, qtbot, engine_factory):
    dialog = window.open_settings()
    dialog.chunk_size.setValue(48)
    ok(dialog)
    qtbot.wait(50)
    assert window.store.run_preferences().chunk_size == 48
    assert len(engine_factory.built) == 1 and not window.host.is_loading


def test_changing_models_during_a_run_cancels_it_then_reloads(
    loaded_window, qtbot, engine_factory, fake_config
):
    fake_config.draft_steps, fake_config.draft_step_s = 200, 0.05
    window = loaded_window
    window.controls.spec_button.click()
    qtbot.waitUntil(lambda: engine_factory.engine.current_stage == "draft", timeout=3000)
    window.apply_settings(ModelSettings(n_ctx=4096), RunPreferences())
    qtbot.waitUntil(lambda: len(engine_factory.built) == 2 and window.host.is_ready, timeout=3000)
    assert window.spec_pane.status.text() == "Cancelled"
    assert engine_factory.built[0].closed
    assert window.controls.spec_button.isEnabled()


def test_cancel_button_also_cancels_model_loading(make_window, qtbot, fake_config):
    fake_config.load_steps, fake_config.load_step_s = 50, 0.05
    window = make_window(wait_ready=False)
    assert window.controls.cancel_button.isEnabled()
    window.controls.cancel_button.click()
    qtbot.waitUntil(lambda: not window.host.is_loading, timeout=1000)
    assert not window.host.is_ready
    assert not window.controls.cancel_button.isEnabled()


def test_threshold_max_new_tokens_and_draft_precision_round_trip(window, qtbot, engine_factory, qsettings):
    dialog = window.open_settings()
    assert dialog.threshold.automatic.isChecked()
    assert dialog.threshold.automatic.text() == "automatic (calibrated prediction, else 4096)"
    assert not dialog.threshold.tokens.isEnabled() and dialog.threshold.tokens.value() == 4096
    assert dialog.max_new_tokens.value() == 256 and dialog.draft_precision.currentData() == "auto"
    dialog.threshold.automatic.setChecked(False)
    assert dialog.threshold.tokens.isEnabled()
    dialog.threshold.tokens.setValue(1000)
    dialog.max_new_tokens.setValue(64)
    dialog.draft_precision.setCurrentIndex(dialog.draft_precision.findData("none"))
    ok(dialog)
    # The draft's precision is a model setting: the engine reloads with it.
    qtbot.waitUntil(lambda: len(engine_factory.built) == 2 and window.host.is_ready, timeout=3000)
    assert engine_factory.settings_seen[-1].draft_quant == "none"
    reread = SettingsStore(QSettings(qsettings.fileName(), QSettings.Format.IniFormat))
    assert reread.run_preferences() == RunPreferences(max_new_tokens=64, min_tokens=1000)
    assert reread.model_settings().draft_quant == "none"
    again = window.open_settings()
    assert not again.threshold.automatic.isChecked() and again.threshold.tokens.value() == 1000
    assert again.max_new_tokens.value() == 64 and again.draft_precision.currentData() == "none"
    again.threshold.automatic.setChecked(True)
    ok(again)
    assert window.store.run_preferences().min_tokens is None  # "automatic" is stored, not a number


def test_threshold_and_max_new_tokens_reach_the_engine(loaded_window, qtbot, engine_factory):
    window = loaded_window
    window.apply_settings(window.store.model_settings(), RunPreferences(max_new_tokens=48, min_tokens=123))
    window.controls.spec_button.click()
    qtbot.waitUntil(lambda: not window.runs.is_active, timeout=5000)
    settings = engine_factory.engine.requests[-1]["settings"]
    assert (settings.min_tokens, settings.max_new_tokens) == (123, 48)
    window.apply_settings(window.store.model_settings(), RunPreferences())
    window.controls.spec_button.click()
    qtbot.waitUntil(lambda: not window.runs.is_active, timeout=5000)
    settings = engine_factory.engine.requests[-1]["settings"]
    assert (settings.min_tokens, settings.max_new_tokens) == (None, 256)


def test_compress_is_offered_and_greyed_out_like_restore_without_gapped_positions(make_window, fake_config):
    fake_config.positions_supported = False
    window = make_window()
    combo = window.controls.positions
    compress = combo.findData("compress")
    assert compress >= 0, "compress comes from the schema's choices"
    assert not combo.model().item(compress).isEnabled()
    assert combo.model().item(combo.findData("renumber")).isEnabled()
    window.controls.set_position_mode("compress")
    assert window.controls.position_mode == "auto"


def test_compress_is_selectable_where_gapped_positions_work(window):
    combo = window.controls.positions
    assert combo.model().item(combo.findData("compress")).isEnabled()
    window.controls.set_position_mode("compress")
    assert window.controls.position_mode == "compress"


def test_a_selected_compress_falls_back_to_auto_when_the_runtime_rejects_gaps(window):
    window.controls.set_position_mode("compress")
    window.controls.set_restore_supported(False)
    assert window.controls.position_mode == "auto"
