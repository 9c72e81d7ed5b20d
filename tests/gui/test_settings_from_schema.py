"""The Settings dialog and its persistence are generated from the settings schema (engine.api).

Ranges, choices, labels, tooltips and defaults come from each field's Option; a stored
value the schema refuses reads back as the field's default.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QCheckBox, QComboBox, QSpinBox

from desktop.model.preferences import RunPreferences
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.run_controls import RunControls
from desktop.widgets.settings_dialog import SettingsDialog
from engine.api import ModelSettings, RunSettings, option_of, options


@pytest.fixture
def dialog(qtbot) -> SettingsDialog:
    dialog = SettingsDialog(ModelSettings(), RunPreferences())
    qtbot.addWidget(dialog)
    return dialog


@pytest.fixture
def store(qsettings) -> SettingsStore:
    return SettingsStore(qsettings)


def edited_fields(cls) -> list[str]:
    return [name for name, option, _ in options(cls) if option.label]


# --- look-ahead 0 (every score NaN) ---------------------------------------------------------


def test_the_dialog_refuses_a_look_ahead_of_zero(qtbot):
    dialog = SettingsDialog(ModelSettings(n_ctx=4096), RunPreferences())
    qtbot.addWidget(dialog)
    assert dialog.lookahead.minimum() == option_of(RunSettings, "lookahead").minimum == 1
    dialog.lookahead.setValue(0)
    assert dialog.run_preferences().lookahead == 1
    dialog.run_preferences().run_settings(0.2, "auto")  # valid: builds without SettingsError


def test_a_stored_look_ahead_of_zero_reads_back_as_the_default(qsettings, store):
    qsettings.setValue("run/lookahead", 0)
    assert store.run_preferences().lookahead == RunSettings().lookahead


@pytest.mark.parametrize(
    ("key", "stored", "field", "cls"),
    [
        ("run/chunk_size", "-3", "chunk_size", RunSettings),
        ("run/max_new_tokens", "lots", "max_new_tokens", RunSettings),
        ("run/draft_window", -1, "draft_window", RunSettings),
        ("models/device", "tpu", "device", ModelSettings),
        ("models/draft_quant", "int4", "draft_quant", ModelSettings),
        ("models/n_ctx", 16, "n_ctx", ModelSettings),
        ("models/n_batch", 0, "n_batch", ModelSettings),
    ],
)
def test_a_stored_value_the_schema_refuses_reads_back_as_the_default(
    qsettings, store, key, stored, field, cls
):
    qsettings.setValue(key, stored)
    read = store.model_settings() if cls is ModelSettings else store.run_preferences()
    assert getattr(read, field) == getattr(cls(), field)


# --- generated from the schema -----------------------------------------------------------------


def test_the_run_preferences_are_the_run_settings_the_dialog_edits():
    assert list(vars(RunPreferences()).keys()) == edited_fields(RunSettings)
    assert RunPreferences().run_settings(RunSettings().keep, RunSettings().positions) == RunSettings()


def test_spin_ranges_tooltips_and_labels_come_from_the_schema(dialog):
    spins = 0
    for cls in (ModelSettings, RunSettings):
        for name in edited_fields(cls):
            option = option_of(cls, name)
            editor = dialog.editor(name)
            assert dialog.label_of(name) == option.label + ":"
            assert option.help in editor.toolTip()
            if isinstance(editor, QSpinBox) and option.minimum is not None:
                spins += 1
                special = 1 if (option.none_means and not option.zero_means) else 0
                assert editor.minimum() == option.minimum - special, name
                if option.maximum is not None:
                    assert editor.maximum() == option.maximum, name
    assert spins >= 5


def test_choices_come_from_the_schema(dialog, qtbot):
    for name in ("device", "draft_quant"):
        combo = dialog.editor(name)
        assert isinstance(combo, QComboBox)
        assert (
            tuple(combo.itemData(i) for i in range(combo.count())) == option_of(ModelSettings, name).choices
        )
    controls = RunControls()
    qtbot.addWidget(controls)
    positions = controls.positions
    assert (
        tuple(positions.itemData(i) for i in range(positions.count()))
        == option_of(RunSettings, "positions").choices
    )
    assert controls.position_mode == RunSettings().positions


def test_the_keep_slider_starts_at_the_schema_default(qtbot, store):
    controls = RunControls()
    qtbot.addWidget(controls)
    assert controls.keep == RunSettings().keep
    assert store.keep_percent() / 100 == RunSettings().keep


def test_keep_auto_greys_the_slider_and_asks_for_auto(qtbot, store):
    controls = RunControls()
    qtbot.addWidget(controls)
    assert not store.keep_auto() and controls.keep_slider.isEnabled()
    with qtbot.waitSignal(controls.keepAutoChanged) as changed:
        controls.keep_auto.setChecked(True)
    assert changed.args == [True] and controls.keep == "auto" and not controls.keep_slider.isEnabled()
    store.save_keep_auto(True)
    assert store.keep_auto()
    controls.set_keep_auto(False)
    assert controls.keep == controls.keep_slider.value() / 100 and controls.keep_slider.isEnabled()


def test_the_flags_are_check_boxes_worded_by_the_schema(dialog):
    truncate = dialog.editor("truncate")
    assert isinstance(truncate, QCheckBox)
    assert truncate.text() == option_of(RunSettings, "truncate").help


def test_every_setting_round_trips_through_the_dialog(dialog):
    models = ModelSettings(
        target_path=Path("/m/t.gguf"),
        draft_path=Path("/m/d"),
        device="cuda",
        draft_quant="none",
        n_threads=3,
        n_ctx=8192,
    )
    prefs = RunPreferences(
        chunk_size=16, lookahead=3, draft_window=0, max_new_tokens=99, min_tokens=0, truncate=True
    )
    dialog.set_values(models, prefs)
    assert dialog.model_settings() == models
    assert dialog.run_preferences() == prefs


# --- the context size: None means the target's trained window -------------------------------


def test_an_automatic_context_is_the_spins_special_value(dialog):
    option = option_of(ModelSettings, "n_ctx")
    assert ModelSettings().n_ctx is None
    assert dialog.context.text().startswith("Auto (")
    assert "trained window, at most 32768" in dialog.context.text()
    assert dialog.model_settings().n_ctx is None
    dialog.context.stepBy(1)
    assert dialog.model_settings().n_ctx == option.minimum  # one step up from Auto: the smallest allowed
    dialog.context.setValue(8192)
    assert dialog.model_settings().n_ctx == 8192
    dialog.restore_defaults()
    assert dialog.model_settings().n_ctx is None


def test_an_automatic_context_is_stored_as_zero_and_an_old_32768_still_reads(qsettings, store):
    store.save_model_settings(ModelSettings())
    assert int(qsettings.value("models/n_ctx")) == 0
    assert store.model_settings().n_ctx is None
    qsettings.setValue("models/n_ctx", 32768)  # what an earlier version stored as its default
    assert store.model_settings().n_ctx == 32768


# --- today's keys, so existing users' settings still load ------------------------------------------


def test_settings_written_by_the_previous_version_still_load(qsettings, store):
    for key, value in {
        "models/target_path": "/m/t.gguf",
        "models/draft_path": "",
        "models/device": "cpu",
        "models/n_threads": 0,
        "models/n_ctx": 4096,
        "models/n_batch": 256,
        "models/draft_quant": "none",
        "run/chunk_size": 16,
        "run/lookahead": 4,
        "run/draft_window": 0,
        "run/max_new_tokens": 64,
        "run/min_tokens": "auto",
        "run/truncate": 1,
        "ui/keep_percent": 35,
        "ui/position_mode": "renumber",
    }.items():
        qsettings.setValue(key, value)
    assert store.model_settings() == ModelSettings(
        target_path=Path("/m/t.gguf"), device="cpu", n_ctx=4096, n_batch=256, draft_quant="none"
    )
    assert store.run_preferences() == RunPreferences(
        chunk_size=16, lookahead=4, draft_window=0, max_new_tokens=64, min_tokens=None, truncate=True
    )
    assert (store.keep_percent(), store.position_mode()) == (35, "renumber")


def test_saving_writes_todays_keys_and_formats(qsettings, store):
    store.save_model_settings(ModelSettings(n_threads=None))
    store.save_run_preferences(RunPreferences(min_tokens=None, truncate=True))
    assert int(qsettings.value("models/n_threads")) == 0
    assert qsettings.value("models/target_path") == ""
    assert qsettings.value("run/min_tokens") == "auto"
    assert int(qsettings.value("run/truncate")) == 1
    assert {key.split("/")[1] for key in qsettings.allKeys() if key.startswith("models/")} == {
        name for name, _, _ in options(ModelSettings)
    }
