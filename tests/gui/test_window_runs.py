"""Runs from the main window: buttons, controls, live panes, comparison, heatmap, cancel, errors."""

from __future__ import annotations

import time

import pytest

from desktop.model.preferences import RunPreferences
from desktop.widgets.question_bar import PRESETS
from engine.core.events import Progress, StageChanged
from engine.pipeline.costmodel import CostModel, Quadratic
from tests.gui.conftest import BASELINE_ANSWER, SPEC_ANSWER, open_and_ask, ticking_timer, wait_run_done


def test_compare_fills_both_panes_the_comparison_and_the_heatmap(loaded_window, qtbot, engine_factory):
    window = loaded_window
    window.controls.compare_button.click()
    assert window.runs.is_active
    wait_run_done(qtbot, window)
    request = engine_factory.engine.requests[-1]
    assert (request["mode"], request["question"]) == ("both", "Summarize this document")
    assert window.baseline_pane.ttft.text() == "4.00 s"
    assert window.spec_pane.ttft.text() == "1.00 s"
    assert window.baseline_pane.answer.toPlainText() == BASELINE_ANSWER
    assert window.spec_pane.answer.toPlainText() == SPEC_ANSWER
    assert window.spec_pane.status.text().startswith("Done")
    assert window.comparison.speedup.text().startswith("Speed-up: 4.00×")
    qtbot.waitUntil(lambda: not window.comparison.agreement_pending, timeout=3000)  # computed on a worker
    assert window.comparison.agreement.text().endswith("% (ROUGE-L)")
    assert window.kept_view.spans, "the heatmap got no selection"
    assert window.kept_view.highlighted_ranges() == window.kept_view.kept_ranges()
    window.comparison.compare_button.click()
    assert window.tabs.currentWidget() is window.answers
    assert "failed" in window.answers.browser.toPlainText()  # the word only the baseline said


@pytest.mark.parametrize(
    ("button", "mode", "touched", "untouched"),
    [
        ("baseline_button", "baseline", "baseline_pane", "spec_pane"),
        ("spec_button", "spec", "spec_pane", "baseline_pane"),
    ],
)
def test_single_run_buttons_run_one_mode(
    loaded_window, qtbot, engine_factory, button, mode, touched, untouched
):
    window = loaded_window
    getattr(window.controls, button).click()
    wait_run_done(qtbot, window)
    assert engine_factory.engine.requests[-1]["mode"] == mode
    assert getattr(window, touched).result is not None
    assert getattr(window, untouched).result is None
    assert getattr(window, untouched).status.text() == "Idle"
    assert window.comparison.speedup.text() == "Speed-up: —"


def test_keep_slider_and_position_mode_reach_the_engine(loaded_window, qtbot, engine_factory):
    window = loaded_window
    window.controls.keep_slider.setValue(35)
    assert window.controls.keep_label.text() == "35%"
    window.controls.positions.setCurrentIndex(window.controls.positions.findData("renumber"))
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    settings = engine_factory.engine.requests[-1]["settings"]
    assert (settings.keep, settings.positions) == (0.35, "renumber")
    assert window.spec_pane.positions.text().startswith("renumber")
    # Both are remembered for the next session.
    assert (window.store.keep_percent(), window.store.position_mode()) == (35, "renumber")


def test_keep_slider_is_bounded_to_5_to_90_percent(window):
    slider = window.controls.keep_slider
    assert (slider.minimum(), slider.maximum(), slider.value()) == (5, 90, 20)
    slider.setValue(99)
    assert slider.value() == 90


def test_settings_dialog_chunk_size_lookahead_and_window_reach_the_engine(
    loaded_window, qtbot, engine_factory
):
    window = loaded_window
    window.store.save_run_preferences(RunPreferences(chunk_size=16, lookahead=4, draft_window=0))
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    settings = engine_factory.engine.requests[-1]["settings"]
    assert (settings.chunk_size, settings.lookahead, settings.draft_window) == (16, 4, 0)


def test_never_two_runs_at_once(loaded_window, qtbot, engine_factory, fake_config):
    fake_config.draft_step_s = 0.03
    window = loaded_window
    window.controls.compare_button.click()
    assert all(not b.isEnabled() for b in window.controls.run_buttons)
    assert window.controls.cancel_button.isEnabled()
    assert not window.open_file_action.isEnabled()
    assert window.start_run("spec") is False
    wait_run_done(qtbot, window)
    assert len(engine_factory.engine.requests) == 1
    assert all(b.isEnabled() for b in window.controls.run_buttons)
    assert not window.controls.cancel_button.isEnabled()


def test_event_loop_stays_responsive_during_a_run(loaded_window, qtbot, fake_config):
    fake_config.draft_steps, fake_config.draft_step_s = 20, 0.02  # about 0.4 s of draft scoring
    window = loaded_window
    ticks = []
    timer = ticking_timer(ticks)
    started = time.monotonic()
    ticks.append(started)  # a click that blocked would show as a gap right here
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    elapsed = time.monotonic() - started
    timer.stop()
    assert elapsed > 0.35
    assert len(ticks) >= 15, f"the timer fired only {len(ticks)} times in {elapsed:.2f} s"
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert max(gaps) < 0.25, f"the GUI thread was blocked for {max(gaps):.2f} s"


def slow_stage(config, stage: str) -> None:
    if stage == "draft":
        config.draft_steps, config.draft_step_s = 200, 0.05
    elif stage == "prefill":
        config.prefill_steps, config.prefill_step_s = 200, 0.05
    elif stage == "generating":
        config.token_s = 0.5


def fast_again(config) -> None:
    config.draft_steps, config.draft_step_s = 4, 0.005
    config.prefill_steps, config.prefill_step_s = 4, 0.005
    config.token_s = 0.002


@pytest.mark.parametrize("stage", ["draft", "prefill", "generating"])
def test_cancel_mid_stage_ends_within_a_second_and_the_app_stays_usable(
    loaded_window, qtbot, engine_factory, fake_config, stage
):
    slow_stage(fake_config, stage)
    window = loaded_window
    window.controls.spec_button.click()
    qtbot.waitUntil(lambda: engine_factory.engine.current_stage == stage, timeout=3000)
    qtbot.wait(60)  # well inside the stage
    if stage == "draft":
        assert window.spec_pane.status.text().startswith("Draft scoring")
    started = time.monotonic()
    window.controls.cancel_button.click()
    wait_run_done(qtbot, window, timeout=1000)
    assert time.monotonic() - started < 1.0
    assert window.spec_pane.status.text() == "Cancelled"
    assert window.spec_pane.result is None
    assert all(b.isEnabled() for b in window.controls.run_buttons)
    assert not window.controls.cancel_button.isEnabled()
    assert window.banner.kind != "error"

    fast_again(fake_config)
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    assert window.spec_pane.result is not None
    assert window.spec_pane.answer.toPlainText() == SPEC_ANSWER


def test_compare_shows_the_fast_answer_first(loaded_window, qtbot, engine_factory):
    window = loaded_window
    window.controls.compare_button.click()
    wait_run_done(qtbot, window)
    assert engine_factory.engine.requests[-1]["spec_first"] is True
    assert window.spec_pane.result is not None and window.baseline_pane.result is not None


def test_cancel_during_compare_keeps_the_finished_spec_answer(
    loaded_window, qtbot, engine_factory, fake_config
):
    fake_config.prefill_steps, fake_config.baseline_prefill_step_s = 200, 0.05
    window = loaded_window
    window.controls.compare_button.click()
    qtbot.waitUntil(
        lambda: window.spec_pane.result is not None and engine_factory.engine.current_stage == "prefill",
        timeout=10_000,
    )
    window.controls.cancel_button.click()
    wait_run_done(qtbot, window, timeout=1000)
    assert window.spec_pane.status.text().startswith("Done")
    assert window.baseline_pane.result is None and window.baseline_pane.status.text() == "Cancelled"


def test_engine_error_is_shown_as_a_message_and_the_app_goes_on(loaded_window, qtbot, fake_config):
    fake_config.fail_stage = "prefill"
    window = loaded_window
    window.controls.baseline_button.click()
    wait_run_done(qtbot, window)
    assert window.banner.kind == "error"
    assert window.banner.text == "fake failure during prefill"
    assert window.baseline_pane.status.text() == "Failed: fake failure during prefill"
    assert window.controls.baseline_button.isEnabled()
    fake_config.fail_stage = None
    window.controls.baseline_button.click()
    wait_run_done(qtbot, window)
    assert window.baseline_pane.result is not None
    assert window.banner.kind == ""  # a new run clears the old error


def test_a_bug_in_the_engine_is_reported_not_raised(loaded_window, qtbot, fake_config, caplog):
    fake_config.crash_stage = "generating"
    window = loaded_window
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    assert window.banner.kind == "error"
    assert "Unexpected error" in window.banner.text and "RuntimeError" in window.banner.text
    assert "fake crash during generating" in caplog.text


def test_bypassed_spec_run_is_clearly_marked(window, qtbot, short_txt):
    window.open_path(str(short_txt))
    qtbot.waitUntil(lambda: window.documents.tokens is not None, timeout=3000)
    window.question.set_question("What is this?")
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    assert not window.spec_pane.notice.isHidden()
    assert window.spec_pane.notice.text().startswith("SpecPrefill bypassed: ")
    assert "below the SpecPrefill threshold of 4096" in window.spec_pane.notice.text()
    assert window.spec_pane.kept.text() == "100% (bypassed)"
    assert window.kept_view.spans == []  # no selection was made


def test_engine_notices_without_a_run_go_to_the_banner(loaded_window, qtbot, fake_config):
    fake_config.notice = "restore positions unsupported by this runtime: using renumber"
    loaded_window.controls.baseline_button.click()
    wait_run_done(qtbot, loaded_window)
    assert loaded_window.banner.kind == "info"
    assert "using renumber" in loaded_window.banner.text


def test_presets_fill_the_question_and_enable_the_run(window, qtbot, long_pdf):
    window.open_path(str(long_pdf))
    qtbot.waitUntil(lambda: window.documents.document is not None, timeout=3000)
    assert window.question.question == ""
    assert not window.controls.compare_button.isEnabled()
    combo = window.question.presets
    assert [combo.itemText(i) for i in range(1, combo.count())] == list(PRESETS)
    combo.activated.emit(PRESETS.index("Where is X handled?") + 1)
    assert window.question.question == "Where is X handled?"
    assert window.question.edit.selectedText() == "X"  # typing replaces the placeholder
    assert combo.currentIndex() == 0
    combo.activated.emit(1)
    assert window.question.question == "Summarize this document"
    assert window.controls.compare_button.isEnabled()


def test_enter_in_the_question_starts_a_compare(loaded_window, qtbot, engine_factory):
    loaded_window.question.edit.returnPressed.emit()
    wait_run_done(qtbot, loaded_window)
    assert engine_factory.engine.requests[-1]["mode"] == "both"


def test_speedup_only_compares_runs_on_the_same_question(loaded_window, qtbot):
    window = loaded_window
    window.controls.compare_button.click()
    wait_run_done(qtbot, window)
    assert window.comparison.speedup.text().startswith("Speed-up: 4.00×")
    window.question.set_question("List the key points")
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    assert window.comparison.speedup.text() == "Speed-up: —"
    window.controls.baseline_button.click()
    wait_run_done(qtbot, window)
    # A follow-up in the document's session: the full document comes from the cache, a tenth of the TTFT.
    assert window.baseline_pane.result.served_by == "cached_full"
    assert window.comparison.speedup.text().startswith("Speed-up: 0.40×")


def test_dropping_a_file_during_a_run_is_refused(loaded_window, qtbot, fake_config, short_txt):
    fake_config.draft_step_s = 0.05
    window = loaded_window
    window.controls.spec_button.click()
    assert window.open_path(str(short_txt)) is False
    assert "run is in progress" in window.banner.text
    window.controls.cancel_button.click()
    wait_run_done(qtbot, window, timeout=1000)
    assert window.documents.document.path.name == "report.pdf"


def test_a_compare_on_a_document_over_the_window_labels_what_each_run_saw(
    make_window, qtbot, fake_config, long_pdf
):
    """A 4,096-token window (3,840 for the prompt): long_pdf's 6,000 tokens are cut for the full
    prefill, and SpecPrefill fits them by its selection."""
    fake_config.n_ctx = 4096
    window = open_and_ask(make_window(), qtbot, long_pdf, "Summarize this document")
    window.controls.compare_button.click()
    wait_run_done(qtbot, window)
    assert (window.baseline_pane.result.fit, window.spec_pane.result.fit) == ("truncated", "selected")
    assert window.baseline_pane.fit.text() == "truncated: saw 64% of the document"
    assert window.spec_pane.fit.text() == "fit by selection: saw 19% of the document"
    thread = window.thread_view.text()
    assert "truncated: saw 64% of the document" in thread
    assert "fit by selection: saw 19% of the document" in thread


# --- about how long is left, from the calibrated cost model -------------------------------------

# 50 ms per token of target prefill, 10 ms per token of draft scoring: at keep 20% long_pdf's 6,000
# tokens predict a 60 s draft and a 60.8 s prefill (1,216 kept) for SpecPrefill, 300 s for the full prefill.
SLOW_CALIBRATION = CostModel(target_prefill=Quadratic(0.0, 0.05, 0.0), draft=Quadratic(0.0, 0.01, 0.0))


def record_etas(window) -> list[tuple[str, str, str, str | None]]:
    """(run, "stage" or "progress", stage, the pane's ETA or None while hidden) after each such event."""
    seen = []

    def record(event) -> None:  # connected after the window's own slot: the pane has taken the event
        if isinstance(event, (StageChanged, Progress)):
            eta = window.panes[event.run].eta
            kind = "stage" if isinstance(event, StageChanged) else "progress"
            seen.append((event.run, kind, event.stage, None if eta.isHidden() else eta.text()))

    window.runs.event.connect(record)
    return seen


def test_a_calibrated_compare_shows_each_stage_counting_down(make_window, qtbot, fake_config, long_pdf):
    fake_config.calibration = SLOW_CALIBRATION
    window = open_and_ask(make_window(), qtbot, long_pdf, "Summarize this document")
    seen = record_etas(window)
    window.controls.compare_button.click()
    assert window.baseline_pane.eta.isHidden()  # queued behind SpecPrefill: nothing to time yet
    wait_run_done(qtbot, window)

    def etas(run: str, kind: str, stage: str) -> list[str | None]:
        return [eta for r, k, s, eta in seen if (r, k, s) == (run, kind, stage)]

    assert etas("spec", "stage", "draft") == ["about 1m00s left"]
    assert etas("spec", "progress", "draft") == [f"about {s}s left" for s in (50, 40, 30, 20, 10, 0)]
    assert etas("spec", "stage", "prefill") == ["about 1m01s left"]
    assert etas("spec", "progress", "prefill") == [f"about {s}s left" for s in (46, 30, 15, 0)]
    assert etas("baseline", "stage", "prefill") == ["about 5m00s left"]
    assert etas("baseline", "progress", "prefill") == [
        "about 3m45s left",
        "about 2m30s left",
        "about 1m15s left",
        "about 0s left",
    ]
    for run in ("spec", "baseline"):
        assert etas(run, "stage", "tokenizing") == etas(run, "stage", "generating") == [None]
    assert etas("spec", "stage", "select") == [None]
    for pane in window.panes.values():  # finished: no ETA left behind
        assert pane.status.text().startswith("Done")
        assert pane.eta.isHidden() and pane.eta.text() == ""


def test_an_uncalibrated_run_shows_no_eta(loaded_window, qtbot):
    window = loaded_window
    seen = record_etas(window)
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    assert [kind for _, kind, _, _ in seen].count("progress") == 10  # 6 draft and 4 prefill steps
    assert {eta for *_, eta in seen} == {None}
