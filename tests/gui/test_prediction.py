"""The document info's prediction: TTFTs from the engine's calibration, and whether SpecPrefill will run.

The fake's calibration costs 1 ms per token of target prefill and 0.2 ms per token of draft
scoring; long_pdf counts 6,000 tokens (188 chunks of 32). So at keep 20% SpecPrefill prefills
38 chunks (1,216 tokens): 1.20 s draft + 1.22 s prefill = 2.42 s against 6.00 s.
"""

from __future__ import annotations

import pytest

from desktop.model.preferences import RunPreferences
from tests.gui.conftest import FAKE_CALIBRATION, wait_run_done

AT_20 = (
    "Predicted TTFT at keep 20%: full prefill 6.00 s → SpecPrefill 2.42 s "
    "(draft 1.20 s + prefill 1.22 s) · speed-up 2.48×"
)
AT_50 = (
    "Predicted TTFT at keep 50%: full prefill 6.00 s → SpecPrefill 4.21 s "
    "(draft 1.20 s + prefill 3.01 s) · speed-up 1.43×"
)
WILL_RUN = "SpecPrefill will run on this document"


@pytest.fixture
def calibrated(fake_config):
    fake_config.calibration = FAKE_CALIBRATION


def open_counted(window, qtbot, path) -> None:
    window.open_path(str(path))

    def predicted() -> bool:
        document = window.documents.document
        return document is not None and document.path == path and bool(window.doc_info.prediction.text())

    qtbot.waitUntil(predicted, timeout=3000)


def test_prediction_follows_the_keep_slider(calibrated, window, qtbot, long_pdf):
    assert window.doc_info.prediction.text() == ""  # nothing to predict without a document
    open_counted(window, qtbot, long_pdf)
    assert window.documents.tokens == 6000
    assert window.doc_info.prediction.text() == AT_20
    assert window.doc_info.bypass.text() == WILL_RUN
    window.controls.keep_slider.setValue(50)
    assert window.doc_info.prediction.text() == AT_50
    window.controls.keep_slider.setValue(20)
    assert window.doc_info.prediction.text() == AT_20


def test_calibrated_automatic_threshold_bypasses_where_no_gain_is_predicted(
    calibrated, window, qtbot, long_pdf
):
    open_counted(window, qtbot, long_pdf)
    window.controls.keep_slider.setValue(90)  # 1.20 s draft + 5.44 s prefill is slower than 6.00 s
    assert window.doc_info.bypass.text() == "SpecPrefill will be bypassed: no gain predicted at 6000 tokens"
    assert "#8a5300" in window.doc_info.bypass.styleSheet()
    window.question.set_question("Summarize this document")
    window.controls.spec_button.click()
    wait_run_done(qtbot, window)
    assert window.spec_pane.result.bypassed  # the run did what the prediction said
    window.controls.keep_slider.setValue(30)
    assert window.doc_info.bypass.text() == WILL_RUN
    assert "#1b5e20" in window.doc_info.bypass.styleSheet()


def test_a_manual_threshold_wins_over_the_calibration(calibrated, window, qtbot, long_pdf):
    open_counted(window, qtbot, long_pdf)
    window.apply_settings(window.store.model_settings(), RunPreferences(min_tokens=10000))
    assert window.doc_info.bypass.text() == (
        "SpecPrefill will be bypassed: 6000 tokens is below the SpecPrefill threshold of 10000"
    )
    window.controls.keep_slider.setValue(90)
    window.apply_settings(window.store.model_settings(), RunPreferences(min_tokens=0))
    assert window.doc_info.bypass.text() == WILL_RUN
    assert window.doc_info.prediction.text().startswith("Predicted TTFT at keep 90%")


def test_without_calibration_the_fixed_threshold_decides(window, qtbot, long_pdf, short_txt):
    open_counted(window, qtbot, long_pdf)
    assert window.doc_info.prediction.text() == (
        "Predicted TTFT: not calibrated: use Models ▸ Calibrate This Machine… (or `specprefill calibrate`)"
    )
    assert window.doc_info.bypass.text() == WILL_RUN
    open_counted(window, qtbot, short_txt)
    assert window.doc_info.bypass.text() == (
        "SpecPrefill will be bypassed: 500 tokens is below the SpecPrefill threshold of 4096"
    )


def test_the_prediction_waits_for_the_reloaded_engine(calibrated, window, qtbot, long_pdf, fake_config):
    open_counted(window, qtbot, long_pdf)
    fake_config.load_step_s = 0.05
    window.reload_action.trigger()
    assert window.doc_info.prediction.text() == "" and window.doc_info.bypass.text() == ""
    window.controls.keep_slider.setValue(50)  # no engine: nothing to predict yet
    assert window.doc_info.prediction.text() == ""
    qtbot.waitUntil(lambda: window.doc_info.prediction.text() == AT_50, timeout=3000)


# --- a document longer than the target's window ------------------------------------------------
# With a 4,096-token window and the default 256 new tokens the target may prefill 3,840 tokens:
# long_pdf's 6,000 are 1.5 windows, and a full prefill sees its first 64%.

OVER_WINDOW = (
    "6,000 tokens · 1.5× the 4,096-token window · SpecPrefill keeps 20% (fits by selection); "
    "a full prefill would see only the first 64%"
)


@pytest.fixture
def small_window(fake_config):
    fake_config.n_ctx = 4096


def test_a_document_over_the_window_says_what_each_run_will_see(small_window, window, qtbot, long_pdf):
    open_counted(window, qtbot, long_pdf)
    assert window.doc_info.details.text() == f"3 pages · 24,002 characters · {OVER_WINDOW}"
    assert window.doc_info.bypass.text() == WILL_RUN  # never bypassed: the selection is what makes it fit
    window.controls.keep_slider.setValue(90)  # more than fits: SpecPrefill keeps what does
    assert window.doc_info.details.text().endswith(
        "SpecPrefill keeps 64% (fits by selection); a full prefill would see only the first 64%"
    )


def test_a_document_within_the_window_shows_its_count_alone(window, qtbot, long_pdf):
    open_counted(window, qtbot, long_pdf)
    assert window.doc_info.details.text() == "3 pages · 24,002 characters · 6,000 tokens"


def test_the_window_line_goes_with_the_engine_and_comes_back_with_it(
    small_window, window, qtbot, long_pdf, fake_config
):
    open_counted(window, qtbot, long_pdf)
    fake_config.load_step_s = 0.05
    window.reload_action.trigger()
    assert window.doc_info.details.text().endswith("· 6,000 tokens")  # the window is the loaded engine's
    qtbot.waitUntil(lambda: window.doc_info.details.text().endswith(OVER_WINDOW), timeout=3000)


def test_the_predicted_full_prefill_of_a_document_over_the_window_is_its_cut_prompt(
    small_window, calibrated, window, qtbot, long_pdf
):
    open_counted(window, qtbot, long_pdf)
    # The full prefill is cut to 3,840 tokens (3.84 s); SpecPrefill's draft reads all 6,000 (1.20 s).
    assert window.doc_info.prediction.text() == (
        "Predicted TTFT at keep 20%: full prefill (cut to fit) 3.84 s → SpecPrefill 2.42 s "
        "(draft 1.20 s + prefill 1.22 s) · speed-up 1.59×"
    )
