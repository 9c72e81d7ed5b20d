"""The real window on the real default models: open a ~600-token excerpt, type a question, Compare.

The threshold is set to 0 tokens so SpecPrefill runs on so short a prompt, and the keep
to 50%, as in the CLI's end-to-end test, so the answer's fact survives the selection.
"""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QSettings

from desktop.app import load_real_document, load_real_engine
from desktop.model.preferences import RunPreferences
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.run_pane import NOT_YET
from desktop.window.main_window import MainWindow
from engine.api import ModelSettings

pytestmark = pytest.mark.real_models
QUESTION = "Where is the zlib documentation (man pages, etc.)? Name the file."
FACT = "zlib.h"
LONG_WAIT_MS = 600_000


@pytest.fixture
def real_window(real_models_ready, qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    store = SettingsStore(settings)
    store.save_run_preferences(RunPreferences(min_tokens=0, max_new_tokens=32))
    store.save_model_settings(ModelSettings(state_cache_gb=0))  # the user's saved states stay untouched
    window = MainWindow(load_real_engine, loader=load_real_document, settings=settings)
    qtbot.addWidget(window)
    window.resize(1400, 900)
    window.show()
    window.start()
    return window


def test_compare_in_the_window_on_the_real_models(real_window, qtbot, short_doc):
    window = real_window
    window.open_path(str(short_doc))
    qtbot.waitUntil(
        lambda: window.host.is_ready and window.documents.tokens is not None, timeout=LONG_WAIT_MS
    )
    assert window.doc_info.bypass.text() == "SpecPrefill will run on this document"
    window.controls.keep_slider.setValue(50)
    qtbot.keyClicks(window.question.edit, QUESTION)
    assert window.controls.compare_button.isEnabled(), window.controls.compare_button.toolTip()
    window.controls.compare_button.click()
    assert window.runs.is_active
    qtbot.waitUntil(lambda: not window.runs.is_active, timeout=LONG_WAIT_MS)

    assert window.banner.kind != "error", window.banner.text
    for pane in (window.baseline_pane, window.spec_pane):
        assert pane.result is not None, pane.status.text()
        assert pane.ttft.text() != NOT_YET and pane.ttft.text().endswith("s")
        assert FACT in pane.answer.toPlainText(), pane.answer.toPlainText()
    assert not window.spec_pane.result.bypassed
    assert window.spec_pane.result.generated_tokens <= 32
    assert (
        window.comparison.speedup.text().startswith("Speed-up: ") and "×" in window.comparison.speedup.text()
    )
    # The agreement is computed on a worker, so it arrives a moment after the answers.
    qtbot.waitUntil(lambda: window.comparison.agreement.text().endswith("% (ROUGE-L)"), timeout=30_000)
    text = window.documents.document.text
    highlighted = window.kept_view.highlighted_ranges()
    assert highlighted
    assert visible_chars(text, highlighted) == visible_chars(text, window.kept_view.kept_ranges())

    # A follow-up compare: the full prefill from the cache against SpecPrefill with the cached draft.
    first_answer = window.baseline_pane.answer.toPlainText()
    window.controls.compare_button.click()
    qtbot.waitUntil(lambda: not window.runs.is_active, timeout=LONG_WAIT_MS)
    assert window.baseline_pane.result.served_by == "cached_full"
    assert window.spec_pane.result.served_by == "spec_cached_draft"
    assert window.baseline_pane.answer.toPlainText() == first_answer  # the same question: the same answer
    assert window.compare_caption.isVisible() and "cached full document" in window.compare_caption.text()
    thread = window.thread_view.text()
    assert thread.count(QUESTION) == 2 and "full prefill from the cache" in thread


def visible_chars(text: str, ranges: list[tuple[int, int]]) -> set[int]:
    """Offsets in `ranges` that can carry a background: Qt lays out a line break as no character."""
    return {i for start, end in ranges for i in range(start, end) if text[i] != "\n"}
