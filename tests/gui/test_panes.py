"""Run panes follow events; the comparison bar shows speed-up and agreement; answers can be compared."""

from __future__ import annotations

import threading

import pytest

from desktop.model.run_progress import eta_seconds, stage_predictions
from desktop.widgets import comparison_bar
from desktop.widgets.answer_diff import AnswerCompareView, word_diff
from desktop.widgets.comparison_bar import ComparisonBar
from desktop.widgets.run_pane import RunPane
from engine.core.events import (
    Notice,
    Progress,
    RunFinished,
    RunResult,
    SelectionMade,
    StageChanged,
    TokenGenerated,
)
from engine.core.settings import RunSettings
from engine.eval.metrics import answer_agreement
from tests.gui.conftest import build_prompt, make_selection


def result(run="spec", answer="Paris is the capital.", ttft=1.0, **extra) -> RunResult:
    fields = dict(
        run=run,
        answer=answer,
        prompt_tokens=8000,
        prefill_tokens=1600,
        ttft_s=ttft,
        decode_tok_s=37.5,
        generated_tokens=5,
        tokenize_s=0.02,
        target_prefill_s=0.8,
        kept_fraction=0.2,
        positions="restore",
    )
    fields.update(extra)
    return RunResult(**fields)


@pytest.fixture
def spec_pane(qtbot) -> RunPane:
    pane = RunPane("spec", "SpecPrefill")
    qtbot.addWidget(pane)
    pane.begin(max_new_tokens=10)
    return pane


def test_pane_follows_a_spec_run_from_stage_to_result(spec_pane):
    pane = spec_pane
    pane.apply(StageChanged("spec", "draft"))
    assert pane.status.text().startswith("Draft scoring")
    pane.apply(Progress("spec", "draft", 512, 8000))
    assert pane.status.text() == "Draft scoring 512 of 8,000 tokens"
    assert (pane.progress.value(), pane.progress.maximum()) == (512, 8000)
    prompt, span = build_prompt("x" * 400, "q")
    pane.apply(SelectionMade("spec", make_selection(prompt, span, RunSettings(keep=0.5, chunk_size=4))))
    assert "chunks" in pane.kept.text()
    pane.apply(Progress("spec", "prefill", 800, 1600))
    assert pane.status.text() == "Prefill 800 of 1,600 tokens"
    pane.apply(StageChanged("spec", "generating"))
    assert pane.ttft.text() == "—"
    pane.apply(TokenGenerated("spec", "Paris", 0))
    assert pane.ttft.text() != "—"  # a provisional, measured TTFT as soon as the first token shows
    pane.apply(TokenGenerated("spec", " is", 1))
    assert pane.answer.toPlainText() == "Paris is"
    assert pane.status.text() == "Generating: 2 tokens"
    assert pane.progress.value() == 2
    assert "as measured here" in pane.ttft_caption.text()
    pane.apply(RunFinished("spec", result(ttft=1.25)))
    assert pane.ttft.text() == "1.25 s"
    assert pane.ttft_caption.text() == "time to first token"
    assert pane.prefilled.text() == "1,600 of 8,000"
    assert pane.decode.text() == "37.5 tok/s"
    assert pane.kept.text() == "20% of 8,000 tokens"
    assert pane.positions.text().startswith("restore")
    assert pane.answer.toPlainText() == "Paris is the capital."
    assert pane.notice.isHidden()


def test_auto_keep_and_coverage_are_explained_beside_the_kept_share(spec_pane):
    spec_pane.apply(
        RunFinished("spec", result(keep_reason="the relevant text is concentrated", covered_parts=12))
    )
    assert spec_pane.kept.text() == (
        "20% of 8,000 tokens · keep auto chose 20%: the relevant text is concentrated; "
        "every one of 12 parts covered"
    )


def test_bypassed_spec_run_says_so_clearly(spec_pane):
    spec_pane.apply(
        RunFinished("spec", result(bypassed=True, bypass_reason="1,200 tokens < 4,096", kept_fraction=1.0))
    )
    assert not spec_pane.notice.isHidden()
    assert spec_pane.notice.text() == "SpecPrefill bypassed: 1,200 tokens < 4,096"
    assert spec_pane.notice.text().count("bypassed") == 1
    assert spec_pane.kept.text() == "100% (bypassed)"


def test_stage_detail_from_the_engine_reads_as_the_status(spec_pane):
    spec_pane.apply(StageChanged("spec", "prefill", "prefilling 1600 of 8000 tokens"))
    assert spec_pane.status.text() == "Prefilling 1600 of 8000 tokens"
    spec_pane.apply(StageChanged("spec", "select"))
    assert spec_pane.status.text() == "Selecting chunks…"


def test_run_notices_and_cancel_and_failure_show_in_the_pane(spec_pane):
    spec_pane.apply(Notice("spec", "restore unsupported: renumbering"))
    assert "renumbering" in spec_pane.notice.text()
    spec_pane.mark_cancelled()
    assert spec_pane.status.text() == "Cancelled"
    spec_pane.begin(10)
    assert spec_pane.notice.isHidden() and spec_pane.answer.toPlainText() == ""
    spec_pane.mark_failed("context overflow")
    assert spec_pane.status.text() == "Failed: context overflow"


def test_baseline_pane_has_no_spec_fields(qtbot):
    pane = RunPane("baseline", "Full prefill")
    qtbot.addWidget(pane)
    pane.apply(RunFinished("baseline", result(run="baseline", prefill_tokens=8000, kept_fraction=1.0)))
    assert pane.kept.text() == "—"
    assert pane.prefilled.text() == "8,000 of 8,000"


def test_comparison_shows_speedup_and_agreement(qtbot):
    bar = ComparisonBar()
    qtbot.addWidget(bar)
    assert bar.speedup.text() == "Speed-up: —"
    assert not bar.compare_button.isEnabled()
    base = result(run="baseline", answer="The parser retries failed requests three times.", ttft=4.0)
    spec = result(answer="The parser retries requests three times.", ttft=1.0)
    bar.show_results(base, spec)
    assert bar.speedup.text().startswith("Speed-up: 4.00×")
    assert "4.00 s → 1.00 s" in bar.speedup.text()
    expected = round(answer_agreement(base.answer, spec.answer) * 100)
    assert 0 < expected < 100
    qtbot.waitUntil(lambda: not bar.agreement_pending, timeout=3000)  # computed on a worker
    assert bar.agreement.text() == f"Answer agreement: {expected}% (ROUGE-L)"
    assert bar.compare_button.isEnabled()
    bar.show_results(base, None)
    assert bar.agreement.text() == "Answer agreement: —"


def test_word_diff_marks_words_only_in_one_answer():
    parts = word_diff("retries failed requests", "retries requests")
    assert ("baseline", "failed ") in parts or ("baseline", "failed") in parts
    assert all(op != "spec" for op, _ in parts)
    joined_baseline = "".join(text for op, text in parts if op in ("same", "baseline"))
    joined_spec = "".join(text for op, text in parts if op in ("same", "spec"))
    assert (joined_baseline, joined_spec) == ("retries failed requests", "retries requests")


def test_answer_view_toggles_between_the_answers(qtbot):
    view = AnswerCompareView()
    qtbot.addWidget(view)
    view.set_answers("alpha beta", "alpha gamma")
    assert view.mode == "diff"
    assert "gamma" in view.browser.toPlainText() and "beta" in view.browser.toPlainText()
    view.toggle()
    assert (view.mode, view.browser.toPlainText()) == ("baseline", "alpha beta")
    view.toggle()
    assert (view.mode, view.browser.toPlainText()) == ("spec", "alpha gamma")
    view.buttons["diff"].click()
    assert view.mode == "diff"
    view.set_answers("only the baseline so far", "")
    assert "once both runs have answered" in view.browser.toPlainText()


def test_agreement_is_computed_off_the_gui_thread(qtbot, monkeypatch):
    threads = []

    def recording_agreement(a: str, b: str) -> float:
        threads.append(threading.current_thread())
        return 0.5

    monkeypatch.setattr(comparison_bar, "answer_agreement", recording_agreement)
    bar = ComparisonBar()
    qtbot.addWidget(bar)
    bar.show_results(result(run="baseline", answer="a b c", ttft=4.0), result(answer="a b", ttft=1.0))
    qtbot.waitUntil(lambda: bar.agreement.text() == "Answer agreement: 50% (ROUGE-L)", timeout=3000)
    assert threads and threading.main_thread() not in threads


def test_a_late_agreement_never_overwrites_newer_results(qtbot, monkeypatch):
    release = threading.Event()

    def slow_agreement(a: str, b: str) -> float:
        release.wait(5)
        return 0.5

    monkeypatch.setattr(comparison_bar, "answer_agreement", slow_agreement)
    bar = ComparisonBar()
    qtbot.addWidget(bar)
    bar.show_results(result(run="baseline", answer="a b c", ttft=4.0), result(answer="a b", ttft=1.0))
    bar.show_results(None, None)
    release.set()
    qtbot.wait(200)
    assert bar.agreement.text() == "Answer agreement: —"


# --- a document longer than the target's window ------------------------------------------------


def test_a_truncated_full_prefill_says_how_much_it_saw(qtbot):
    pane = RunPane("baseline", "Full prefill")
    qtbot.addWidget(pane)
    pane.begin(max_new_tokens=10)
    pane.apply(
        RunFinished(
            "baseline",
            result(
                run="baseline",
                prompt_tokens=32256,
                prefill_tokens=32256,
                kept_fraction=1.0,
                document_tokens=62114,
                fit="truncated",
                seen_fraction=0.52,
                truncated_tokens=29858,
            ),
        )
    )
    assert not pane.fit.isHidden()
    assert pane.fit.text() == "truncated: saw 52% of the document"
    pane.begin(max_new_tokens=10)  # the next run starts without the last one's label
    assert pane.fit.isHidden() and pane.fit.text() == ""


def test_a_spec_run_fitted_by_selection_says_how_much_it_saw(spec_pane):
    spec_pane.apply(
        RunFinished(
            "spec",
            result(
                prompt_tokens=62114,
                prefill_tokens=11180,
                kept_fraction=0.18,
                positions="compress",
                document_tokens=62000,
                fit="selected",
                seen_fraction=0.18,
            ),
        )
    )
    assert not spec_pane.fit.isHidden()
    assert spec_pane.fit.text() == "fit by selection: saw 18% of the document"
    assert spec_pane.positions.text() == "compress (gaps shrunk to fit)"


def test_a_run_that_saw_the_whole_document_has_no_fit_label(spec_pane):
    spec_pane.apply(RunFinished("spec", result(document_tokens=7900)))
    assert spec_pane.fit.isHidden()
    assert spec_pane.fit.text() == ""


def test_a_long_draft_stage_shows_its_progress(spec_pane):
    """A document of several windows: the draft scores all of it, segment by segment."""
    spec_pane.apply(StageChanged("spec", "draft"))
    spec_pane.apply(Progress("spec", "draft", 48_500, 212_400))
    assert spec_pane.status.text() == "Draft scoring 48,500 of 212,400 tokens"
    assert (spec_pane.progress.value(), spec_pane.progress.maximum()) == (48_500, 212_400)


def test_the_speedup_over_a_truncated_full_prefill_says_so(qtbot):
    bar = ComparisonBar()
    qtbot.addWidget(bar)
    bar.show_results(
        result(run="baseline", ttft=3.84, fit="truncated", seen_fraction=0.64), result(ttft=2.42)
    )
    assert bar.speedup.text() == "Speed-up: 1.59× (TTFT 3.84 s → 2.42 s, full prefill truncated)"


# --- about how long is left, from the calibrated cost model -------------------------------------

ESTIMATE = {"baseline_ttft_s": 300.0, "spec_ttft_s": 260.0, "draft_s": 200.0, "target_prefill_s": 60.0}


def test_eta_is_the_predicted_stage_time_times_the_share_left():
    assert eta_seconds(200.0, 0, 8000) == 200.0
    assert eta_seconds(200.0, 2000, 8000) == 150.0
    assert eta_seconds(200.0, 8000, 8000) == 0.0
    assert eta_seconds(200.0, 9000, 8000) == 0.0  # never below nothing left
    assert eta_seconds(None, 2000, 8000) is None  # not calibrated
    assert eta_seconds(200.0, 0, 0) is None  # no total to take a share of


def test_each_run_is_timed_by_its_own_stages():
    assert stage_predictions("spec", ESTIMATE) == {"draft": 200.0, "prefill": 60.0}
    assert stage_predictions("baseline", ESTIMATE) == {"prefill": 300.0}
    assert stage_predictions("spec", ESTIMATE, bypassed=True) == {"prefill": 300.0}  # it runs a full prefill
    assert stage_predictions("spec", None) is None


def eta(pane: RunPane) -> str | None:
    """The pane's "about … left", or None while it is hidden."""
    return None if pane.eta.isHidden() else pane.eta.text()


def test_a_predicted_draft_stage_counts_down_and_the_eta_goes_when_the_run_ends(qtbot):
    pane = RunPane("spec", "SpecPrefill")
    qtbot.addWidget(pane)
    pane.begin(10, stage_seconds=stage_predictions("spec", ESTIMATE))
    assert eta(pane) is None
    for event, expected in [
        (StageChanged("spec", "tokenizing"), None),
        (StageChanged("spec", "draft"), "about 3m20s left"),
        (Progress("spec", "draft", 53_100, 212_400), "about 2m30s left"),
        (Progress("spec", "draft", 159_300, 212_400), "about 50s left"),
        (StageChanged("spec", "select"), None),
        (StageChanged("spec", "prefill"), "about 1m00s left"),
        (Progress("spec", "prefill", 800, 1600), "about 30s left"),
        (StageChanged("spec", "generating"), None),
    ]:
        pane.apply(event)
        assert eta(pane) == expected, event
    pane.apply(StageChanged("spec", "draft"))  # (as if) timed again, then the result lands
    pane.apply(RunFinished("spec", result()))
    assert eta(pane) is None and pane.eta.text() == ""


def test_a_full_prefill_pane_times_its_prefill(qtbot):
    pane = RunPane("baseline", "Full prefill")
    qtbot.addWidget(pane)
    pane.begin(10, stage_seconds=stage_predictions("baseline", ESTIMATE))
    pane.apply(StageChanged("baseline", "prefill"))
    assert eta(pane) == "about 5m00s left"
    pane.apply(Progress("baseline", "prefill", 2000, 8000))
    assert eta(pane) == "about 3m45s left"


def test_cancel_failure_and_a_new_run_hide_the_eta(qtbot):
    pane = RunPane("spec", "SpecPrefill")
    qtbot.addWidget(pane)
    for end in (pane.mark_cancelling, pane.mark_cancelled, lambda: pane.mark_failed("context overflow")):
        pane.begin(10, stage_seconds=stage_predictions("spec", ESTIMATE))
        pane.apply(Progress("spec", "draft", 1000, 8000))
        assert eta(pane) == "about 2m55s left"
        end()
        assert eta(pane) is None
    pane.begin(10, stage_seconds=stage_predictions("spec", ESTIMATE))
    pane.apply(Progress("spec", "draft", 1000, 8000))
    pane.begin(10)  # the next run, on a machine no longer calibrated
    assert eta(pane) is None
    pane.apply(Progress("spec", "draft", 1000, 8000))
    assert eta(pane) is None


def test_a_pane_without_a_prediction_shows_no_eta(spec_pane):
    spec_pane.apply(StageChanged("spec", "draft"))
    spec_pane.apply(Progress("spec", "draft", 48_500, 212_400))
    assert spec_pane.status.text() == "Draft scoring 48,500 of 212,400 tokens"  # the progress, as ever
    assert eta(spec_pane) is None and spec_pane.eta.text() == ""
    spec_pane.apply(Progress("spec", "prefill", 800, 1600))
    assert eta(spec_pane) is None
