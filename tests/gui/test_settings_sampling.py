"""The Settings dialog's Sampling box: the schema's sampling settings, edited and stored like the others."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QGroupBox

from desktop.model.preferences import RunPreferences
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.settings_dialog import SettingsDialog
from engine.api import ModelSettings, RunSettings, option_of
from engine.core.settings import SAMPLING, sampling_fields


@pytest.fixture
def dialog(qtbot) -> SettingsDialog:
    dialog = SettingsDialog(ModelSettings(), RunPreferences())
    qtbot.addWidget(dialog)
    return dialog


def test_the_sampling_settings_are_in_their_own_box(dialog):
    box = dialog.groups[SAMPLING]
    assert isinstance(box, QGroupBox) and box.title() == "Sampling"
    for name in sampling_fields():
        assert box.isAncestorOf(dialog.editor(name)), name
        assert dialog.label_of(name) == option_of(RunSettings, name).label + ":"
    assert not box.isAncestorOf(dialog.editor("max_new_tokens"))


def test_the_sampling_settings_round_trip_through_the_dialog_and_the_store(dialog, qsettings):
    prefs = RunPreferences(
        temperature=0.7,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        seed=1234,
        presence_penalty=-0.5,
        frequency_penalty=0.25,
        repeat_penalty=1.1,
    )
    dialog.set_values(ModelSettings(), prefs)
    assert dialog.run_preferences() == prefs
    store = SettingsStore(qsettings)
    store.save_run_preferences(prefs)
    assert store.run_preferences() == prefs


def test_the_defaults_read_greedy_with_a_random_seed(dialog, qsettings):
    assert dialog.editor("temperature").text().startswith("0 (greedy")
    assert dialog.editor("seed").automatic.isChecked()
    assert dialog.run_preferences().seed is None
    store = SettingsStore(qsettings)
    store.save_run_preferences(RunPreferences())
    assert store.run_preferences() == RunPreferences()


def test_the_dialog_cannot_offer_a_repeat_penalty_of_zero(dialog):
    spin = dialog.editor("repeat_penalty")
    spin.setValue(0.0)
    assert spin.value() > 0
    dialog.run_preferences().run_settings(0.2, "auto")  # builds without SettingsError
