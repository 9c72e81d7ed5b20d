"""Models ▸ Choose Models…: the discovered models in a table; picking one plans its draft on a
worker thread, and OK gives the settings with that target and draft."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QDialogButtonBox

from desktop.widgets.model_picker import ModelPicker
from engine.api import Discovery, ModelSettings
from engine.models.discover import DiscoveredModel
from engine.models.gguf_facts import read_facts
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf


def found(path, name):
    return DiscoveredModel(
        name, f"test:{name}", "lmstudio", path, path.resolve(), path.stat().st_size, read_facts(path)
    )


@pytest.fixture
def discovery(tmp_path):
    big = write_tiny_qwen2_gguf(tmp_path / "big.gguf", n_layer=4, n_embd=256, n_ff=512, seed=1)
    small = write_tiny_qwen2_gguf(tmp_path / "small.gguf", n_layer=2, n_embd=64, seed=2)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF not really")
    models = [
        found(big, "big"),
        found(small, "small"),
        DiscoveredModel("broken", "test:broken", "ollama", broken, broken, 15, None, "not a GGUF file"),
    ]
    return Discovery(sources=[], models=models)


def test_picking_a_target_suggests_the_small_model_and_ok_keeps_both(qtbot, discovery, monkeypatch):
    from engine.pipeline import model_choice

    monkeypatch.setattr(model_choice, "scaled_prediction", lambda *_: None)
    picker = ModelPicker(ModelSettings(), discover=lambda: discovery)
    qtbot.addWidget(picker)
    ok = picker.buttons.button(QDialogButtonBox.StandardButton.Ok)
    qtbot.waitUntil(lambda: picker.table.rowCount() == 2, timeout=5000)  # the unreadable one is left out
    assert "1 unreadable" in picker.status.text() and not ok.isEnabled()
    names = [picker.table.item(row, 0).text() for row in range(2)]
    picker.table.selectRow(names.index("big"))
    qtbot.waitUntil(ok.isEnabled, timeout=10000)
    assert "Draft: small" in picker.status.text() and "token ids" in picker.status.text()
    chosen = picker.model_settings()
    assert chosen.target_path == discovery.models[0].resolved_path
    assert chosen.draft_path == discovery.models[1].resolved_path


def test_the_window_offers_the_picker_in_the_models_menu(window):
    titles = [a.text() for a in window.menuBar().actions()]
    models_menu = window.menuBar().actions()[titles.index("&Models")].menu()
    assert "&Choose Models…" in [a.text() for a in models_menu.actions()]
