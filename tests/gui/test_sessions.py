"""Document sessions in the app: each document's thread, how each answer was served, the
follow-up compare, the background full prefill (progress, pause for a question, resume),
the one "Clear thread and caches" action, and the float settings the session caches use."""

from __future__ import annotations

import time

import pytest
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox

from desktop.model.doc_threads import FOLLOW_UP_CAPTION
from desktop.model.preferences import RunPreferences
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.settings_dialog import SettingsDialog
from engine.api import SERVED_BY_LABELS, ModelSettings, option_of
from tests.gui.conftest import SPEC_ANSWER, open_and_ask, page_text, wait_run_done

READY_NOTE = "Follow-ups answer from the full cached document"


def slow_fill(engine, batches: int = 20, batch_s: float = 0.03) -> None:
    engine.session_config.background_batches = batches
    engine.session_config.background_batch_s = batch_s


def wait_fill(qtbot, window, word: str, timeout: int = 5000) -> None:
    qtbot.waitUntil(
        lambda: f"— {word}" in window.fill_status.text or window.fill_status.text.endswith(word),
        timeout=timeout,
    )


def switch_to(window, qtbot, path, question: str) -> None:
    """Open another document and wait until it is the window's, with its tokens counted."""
    window.open_path(str(path))
    qtbot.waitUntil(
        lambda: window.documents.document.path == path and window.documents.tokens is not None, timeout=3000
    )
    window.question.set_question(question)


def wait_fill_running(qtbot, window) -> None:
    """Until the fill has reported progress: it runs on the engine, not only in the status bar."""
    qtbot.waitUntil(
        lambda: window.thread.fill.status == "filling" and window.thread.fill.done > 0, timeout=3000
    )


def start_slow_fill(window, qtbot, engine, batches: int, batch_s: float) -> None:
    """A SpecPrefill answer, then a slow background fill, running."""
    slow_fill(engine, batches=batches, batch_s=batch_s)
    ask(window, qtbot, "spec_button")
    wait_fill_running(qtbot, window)


def ask(window, qtbot, button: str = "ask_button") -> None:
    getattr(window.controls, button).click()
    assert window.runs.is_active, "the question did not start"
    wait_run_done(qtbot, window)


# --- served_by in the thread and the panes ---------------------------------------------------


def test_a_follow_up_says_which_path_served_it(loaded_window, qtbot, engine_factory):
    window = loaded_window
    ask(window, qtbot)  # Ask: the engine's "auto" mode, SpecPrefill for a first question
    engine = engine_factory.engine
    assert engine.requests[-1]["mode"] == "auto"
    assert engine.requests[-1]["session"] is window.thread.session
    assert window.spec_pane.answer.toPlainText() == SPEC_ANSWER
    assert window.spec_pane.ttft_caption.text().endswith(SERVED_BY_LABELS["spec"])
    wait_fill(qtbot, window, "ready")  # the background fill put the whole document in the cache
    window.question.set_question("List the key points")
    ask(window, qtbot)
    assert window.baseline_pane.result.served_by == "cached_full"
    text = window.thread_view.text()
    assert "Q1: Summarize this document" in text and "Q2: List the key points" in text
    assert f"{SERVED_BY_LABELS['spec']} · TTFT 1.00 s" in text
    assert f"{SERVED_BY_LABELS['cached_full']} · TTFT 400 ms" in text
    assert text.index("Q1") < text.index(SERVED_BY_LABELS["spec"]) < text.index("Q2")


def test_a_compare_on_a_follow_up_says_it_compares_the_cached_document(loaded_window, qtbot, engine_factory):
    window = loaded_window
    engine_factory.engine.session_config.draft_cache = True
    ask(window, qtbot, "compare_button")
    assert window.baseline_pane.result.served_by == "cold_full"
    assert window.compare_caption.isHidden()  # a first compare is a cold full prefill vs SpecPrefill
    assert FOLLOW_UP_CAPTION not in window.thread_view.text()
    window.question.set_question("List the key points")
    ask(window, qtbot, "compare_button")
    assert engine_factory.engine.requests[-1]["mode"] == "both"
    assert window.baseline_pane.result.served_by == "cached_full"
    assert window.spec_pane.result.served_by == "spec_cached_draft"
    assert not window.compare_caption.isHidden()
    assert window.compare_caption.text() == FOLLOW_UP_CAPTION
    text = window.thread_view.text()
    assert text.count(FOLLOW_UP_CAPTION) == 1
    assert SERVED_BY_LABELS["spec_cached_draft"] in text
    qtbot.waitUntil(lambda: not window.comparison.agreement_pending, timeout=3000)  # its worker ends here


# --- the background full prefill -------------------------------------------------------------


def test_the_fill_starts_after_a_spec_answer_pauses_for_a_question_and_resumes(
    loaded_window, qtbot, engine_factory, fake_config
):
    window = loaded_window
    engine = engine_factory.engine
    slow_fill(engine)
    states = []
    window.fill.changed.connect(lambda thread: states.append((thread.fill.status, thread.fill.done)))
    ask(window, qtbot, "spec_button")
    wait_fill(qtbot, window, "filling")
    assert window.fill_status.bar.isVisible()
    fill = lambda: window.thread.fill  # noqa: E731 - replaced on every report
    qtbot.waitUntil(lambda: fill().total > 0 and fill().done >= fill().total // 4, timeout=3000)
    total = fill().total
    assert f"/ {total:,} tokens — filling" in window.fill_status.text

    fake_config.draft_step_s = 0.05  # a question slow enough to see the fill paused meanwhile
    window.question.set_question("List the key points")
    window.controls.spec_button.click()
    assert window.runs.is_active  # not queued behind the fill
    qtbot.waitUntil(lambda: "— paused" in window.fill_status.text, timeout=2000)
    assert window.runs.is_active and not window.fill_status.bar.isVisible()
    paused_at = window.thread.fill.done
    assert engine.background_calls[-1].status == "paused"
    wait_run_done(qtbot, window)

    wait_fill(qtbot, window, "ready")
    assert READY_NOTE in window.fill_status.text
    assert [call.status for call in engine.background_calls] == ["paused", "done"]
    resumed = [done for status, done in states[states.index(("paused", paused_at)) :] if status == "filling"]
    assert resumed[1] > paused_at, "the fill started again from the start instead of resuming"


def test_no_fill_when_the_setting_is_off(loaded_window, qtbot, engine_factory):
    window = loaded_window
    window.store.save_run_preferences(RunPreferences(background_prefill=False))
    ask(window, qtbot, "spec_button")
    qtbot.wait(150)
    assert engine_factory.engine.background_calls == []
    assert window.fill_status.text.endswith("off")


def test_turning_the_setting_off_cancels_a_running_fill(loaded_window, qtbot, engine_factory):
    window = loaded_window
    engine = engine_factory.engine
    start_slow_fill(window, qtbot, engine, batches=50, batch_s=0.05)
    window.apply_settings(window.store.model_settings(), RunPreferences(background_prefill=False))
    qtbot.waitUntil(
        lambda: bool(engine.background_calls) and engine.background_calls[-1].status == "cancelled",
        timeout=1000,
    )
    qtbot.waitUntil(lambda: not window.fill.is_active, timeout=1000)
    assert window.fill_status.text.endswith("off")


def test_a_full_answer_leaves_the_document_ready_without_a_fill(loaded_window, qtbot, engine_factory):
    window = loaded_window
    ask(window, qtbot, "baseline_button")
    assert window.baseline_pane.result.served_by == "cold_full"
    assert READY_NOTE in window.fill_status.text
    assert engine_factory.engine.background_calls == []


def test_closing_the_window_cancels_the_fill_at_once(make_window, qtbot, engine_factory, long_pdf):
    window = open_and_ask(make_window(), qtbot, long_pdf, "Summarize this document")
    start_slow_fill(window, qtbot, engine_factory.engine, batches=100, batch_s=0.3)
    started = time.monotonic()
    window.close()
    assert time.monotonic() - started < 1.0
    assert engine_factory.engine.background_calls[-1].status == "cancelled"


# --- one action clears the thread and the caches --------------------------------------------------


@pytest.mark.parametrize("trigger", ["menu", "button"])
def test_clear_empties_the_thread_and_forgets_the_saved_state(loaded_window, qtbot, engine_factory, trigger):
    window = loaded_window
    ask(window, qtbot, "baseline_button")
    session = window.thread.session
    assert "Q1: Summarize this document" in window.thread_view.text()
    if trigger == "menu":
        window.clear_thread_action.trigger()
    else:
        window.thread_view.clear_button.click()
    assert window.thread_view.text().strip() == ""
    assert window.thread.exchanges == []
    engine = engine_factory.engine
    qtbot.waitUntil(lambda: engine.forgotten == [(session, True)], timeout=2000)
    ask(window, qtbot, "baseline_button")
    assert window.baseline_pane.result.served_by == "cold_full"  # the cache really was dropped


def test_clear_is_refused_during_a_run(loaded_window, qtbot, fake_config):
    fake_config.draft_step_s = 0.05
    window = loaded_window
    window.controls.spec_button.click()
    assert not window.clear_thread_action.isEnabled() and not window.thread_view.clear_button.isEnabled()
    assert window.clear_thread() is False
    wait_run_done(qtbot, window)
    assert window.clear_thread_action.isEnabled()


# --- each document its own thread --------------------------------------------------------------------


def test_switching_documents_switches_threads(loaded_window, qtbot, engine_factory, tmp_path, long_pdf):
    window = loaded_window
    ask(window, qtbot, "baseline_button")
    first_session = window.thread.session
    other = tmp_path / "other.txt"
    other.write_text(page_text(7, 20000), encoding="utf-8")
    switch_to(window, qtbot, other, "What is on page 7?")
    assert window.thread_view.title.text() == "Thread: other.txt"
    assert "Summarize this document" not in window.thread_view.text()
    ask(window, qtbot, "baseline_button")
    assert "Q1: What is on page 7?" in window.thread_view.text()
    assert engine_factory.engine.requests[-1]["session"] is not first_session

    switch_to(window, qtbot, long_pdf, "Summarize this document")
    text = window.thread_view.text()
    assert "Q1: Summarize this document" in text and "page 7" not in text  # nothing lost
    assert window.thread.session is not first_session  # reloaded: a fresh engine session
    assert len(window.threads) == 2


# --- the float settings (GB of cache) and the background toggle -----------------------------------


def test_float_settings_have_decimal_editors_from_the_schema(qtbot):
    dialog = SettingsDialog(ModelSettings(), RunPreferences())
    qtbot.addWidget(dialog)
    for name in ("state_cache_gb", "draft_cache_gb"):
        option = option_of(ModelSettings, name)
        editor = dialog.editor(name)
        assert isinstance(editor, QDoubleSpinBox)
        assert (editor.minimum(), editor.maximum()) == (option.minimum, option.maximum)
        assert dialog.label_of(name) == option.label + ":"
        editor.setValue(0)
        assert option.zero_means in editor.text()  # 0 says it means off
    assert isinstance(dialog.editor("background_prefill"), QCheckBox)
    dialog.set_values(
        ModelSettings(state_cache_gb=2.5, draft_cache_gb=0.0), RunPreferences(background_prefill=False)
    )
    assert dialog.model_settings() == ModelSettings(state_cache_gb=2.5, draft_cache_gb=0.0)
    assert dialog.run_preferences().background_prefill is False


def test_float_settings_and_the_background_toggle_persist(qsettings, tmp_path):
    store = SettingsStore(qsettings)
    store.save_model_settings(ModelSettings(state_cache_gb=2.5, draft_cache_gb=0.0))
    store.save_run_preferences(RunPreferences(background_prefill=False))
    qsettings.sync()
    from PySide6.QtCore import QSettings  # a fresh reader of the same ini file

    again = SettingsStore(QSettings(qsettings.fileName(), QSettings.Format.IniFormat))
    models = again.model_settings()
    assert (models.state_cache_gb, models.draft_cache_gb) == (2.5, 0.0)
    assert isinstance(models.state_cache_gb, float)
    assert again.run_preferences().background_prefill is False
    qsettings.setValue("models/draft_cache_gb", "-1")  # refused by the schema: the default
    assert SettingsStore(qsettings).model_settings().draft_cache_gb == ModelSettings().draft_cache_gb


# --- scheduling: other engine jobs never run alongside the fill ----------------------------------------


def test_other_engine_jobs_cancel_the_fill_and_wait_for_it(loaded_window, qtbot, engine_factory):
    window = loaded_window
    engine = engine_factory.engine
    start_slow_fill(window, qtbot, engine, batches=100, batch_s=0.2)
    seen = []
    window.host.submit("probe", lambda eng, ctx: seen.append(eng._background_idle.is_set()))
    qtbot.waitUntil(lambda: bool(seen), timeout=2000)
    assert seen == [True]  # it ran only once the fill had let go of the target
    assert engine.background_calls[-1].status == "cancelled"
    qtbot.waitUntil(lambda: "— paused" in window.fill_status.text, timeout=1000)


def test_a_new_engine_starts_the_fill_over(loaded_window, qtbot, engine_factory):
    window = loaded_window
    ask(window, qtbot, "baseline_button")
    assert READY_NOTE in window.fill_status.text
    window.apply_settings(ModelSettings(n_threads=2), window.store.run_preferences())  # reloads the models
    qtbot.waitUntil(lambda: len(engine_factory.built) == 2 and window.host.is_ready, timeout=3000)
    assert window.fill_status.text == "Full document cache: not filled"
