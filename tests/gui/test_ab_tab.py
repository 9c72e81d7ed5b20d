"""The A/B test tab: suites opened, built and saved; runs with progress, results, plots, export, cancel.

Suite documents are real text files: engine.eval.ab loads them with engine.ingest on the engine
thread, as it does in the app. The fake engine answers; at keep 0.1 its SpecPrefill answer
loses the word "retries", so that case's keep 0.1 run is scored incorrect.
"""

from __future__ import annotations

import json
import time

import pytest
from PySide6.QtWidgets import QCheckBox, QFileDialog

from engine.core.formatting import format_percent
from engine.core.settings import RunSettings
from engine.eval.metrics import answer_agreement
from engine.eval.report import CSV_COLUMNS
from engine.eval.suite import load_suite
from tests.gui.conftest import (
    BASELINE_ANSWER,
    SPEC_ANSWER,
    open_and_ask,
    page_text,
    spec_answer,
    wait_run_done,
)

CASES = [
    {
        "id": "alpha",
        "kind": "fact",
        "doc": "docs/a.txt",
        "question": "What does the parser retry?",
        "answers": ["retries"],
    },
    {"id": "beta", "kind": "summary", "doc": "docs/b.txt", "question": "Summarize page 2"},
]
N_RUNS = len(CASES) * 4  # the baseline and three keeps per case


def write_suite(path, cases) -> None:
    path.write_text("".join(json.dumps(case) + "\n" for case in cases), encoding="utf-8")


@pytest.fixture
def suite_file(tmp_path):
    """Two cases on two 5,000-token text files: above the fixed threshold, so SpecPrefill runs."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text(page_text(1, 20000), encoding="utf-8")
    (tmp_path / "docs" / "b.txt").write_text(page_text(2, 20000), encoding="utf-8")
    path = tmp_path / "suite.jsonl"
    write_suite(path, CASES)
    return path


@pytest.fixture
def notes_txt(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text(page_text(3, 24000), encoding="utf-8")
    return path


@pytest.fixture
def notes_window(window, qtbot, notes_txt):
    """The open document is a real text file (the quick check reads it again with engine.ingest)."""
    return open_and_ask(window, qtbot, notes_txt, "What does the parser retry?")


def wait_ab_done(qtbot, window, timeout: int = 10000) -> None:
    qtbot.waitUntil(lambda: not window.ab.is_active, timeout=timeout)


def save_dialog_returns(monkeypatch, path) -> None:
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(path), "")))


# --- suites ---------------------------------------------------------------------------------------


def test_opening_a_suite_lists_its_cases(window, suite_file):
    tab = window.ab_tab
    assert not tab.run_button.isEnabled()  # no cases yet
    assert tab.suite.open_suite(suite_file)
    table = tab.suite.table
    assert table.rowCount() == 2
    assert [table.item(row, 0).text() for row in range(2)] == ["alpha", "beta"]
    assert table.item(0, 3).text() == "retries" and table.item(1, 3).text() == "(agreement only)"
    assert table.item(0, 4).text() == "a.txt"
    assert tab.suite.message.text() == "2 cases loaded."
    assert tab.run_button.isEnabled()
    window.show_tab("ab")
    assert window.tabs.currentWidget() is tab


def test_a_bad_suite_line_is_reported_with_its_line_number(window, suite_file, tmp_path):
    tab = window.ab_tab
    tab.suite.open_suite(suite_file)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(CASES[0]) + "\n" + '{"id": "beta", "doc": \n', encoding="utf-8")
    assert not tab.suite.open_suite(bad)
    message = tab.suite.message.text()
    assert message.startswith(f"Could not open the suite: {bad}:2: invalid JSON")
    assert "#b91c1c" in tab.suite.message.styleSheet()
    assert tab.suite.table.rowCount() == 2  # the suite shown before is kept
    assert tab.suite.name == "suite.jsonl"


def test_building_a_suite_from_the_open_document_and_saving_it(
    notes_window, qtbot, monkeypatch, tmp_path, fake_config
):
    window, panel = notes_window, notes_window.ab_tab.suite
    assert panel.add_button.isEnabled() and not panel.save_button.isEnabled()
    panel.answers.setText("retries | retry")
    panel.add_button.click()
    panel.add_button.click()  # same document and question again: a second, uniquely named case
    assert [panel.table.item(row, 0).text() for row in range(2)] == ["notes", "notes-2"]
    assert panel.table.item(0, 3).text() == "retries | retry"
    assert panel.table.item(1, 3).text() == "(agreement only)"
    panel.table.selectRow(1)
    panel.remove_button.click()
    panel.case_id.setText("my case")
    panel.add_button.click()
    save_dialog_returns(monkeypatch, tmp_path / "built")
    panel.save_button.click()
    saved = tmp_path / "built.jsonl"
    assert panel.message.text() == "Saved 2 cases." and panel.source.text() == str(saved)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left
    lines = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {
        "id": "notes",
        "kind": "other",
        "doc": "notes.txt",
        "question": "What does the parser retry?",
        "answers": ["retries", "retry"],
    }
    assert "answers" not in lines[1] and lines[1]["id"] == "my case"
    cases = load_suite(saved)  # what the CLI would read
    assert [c.id for c in cases] == ["notes", "my case"] and cases[0].answers == ("retries", "retry")
    # The built suite runs like an opened one.
    fake_config.make_fast()
    window.ab_tab.run_button.click()
    wait_ab_done(qtbot, window)
    assert window.ab_tab.results.cases.text("notes", "baseline correct") == "✓"


def test_keep_values_are_checked_before_running(window, qtbot, suite_file, engine_factory):
    tab = window.ab_tab
    tab.suite.open_suite(suite_file)
    tab.keeps.setText("0.1, 2")
    tab.run_button.click()
    assert not window.ab.is_active and engine_factory.engine.requests == []
    assert tab.message.text() == "Keep values: keep must be in (0, 1], got 2"


# --- running ---------------------------------------------------------------------------------------


def test_a_suite_runs_with_progress_and_fills_the_results(
    window, qtbot, suite_file, engine_factory, fake_config
):
    fake_config.make_fast()
    tab = window.ab_tab
    tab.suite.open_suite(suite_file)
    seen = []
    window.ab.progress.connect(lambda _p: seen.append(tab.progress_label.text()))
    tab.run_button.click()
    assert window.ab.is_active and tab.cancel_button.isEnabled()
    wait_ab_done(qtbot, window)

    assert len(seen) == N_RUNS
    assert seen[0] == "case 1 of 2 · baseline · ETA estimating…"
    assert seen[-1].startswith("case 2 of 2 · keep 0.3 · ETA ")
    assert tab.progress.value() == tab.progress.maximum() == N_RUNS and tab.progress_label.text() == "done"
    spec_keeps = [r["settings"].keep for r in engine_factory.engine.requests if r["mode"] == "spec"]
    assert spec_keeps == [0.1, 0.2, 0.3] * 2

    cases = tab.results.cases
    assert tab.results.title.text() == "Results: suite.jsonl"
    assert cases.text("alpha", "baseline answer") == BASELINE_ANSWER
    assert (cases.text("alpha", "baseline correct"), cases.text("alpha", "baseline TTFT")) == ("✓", "4.00 s")
    assert cases.text("alpha", "keep 0.1 correct") == "✗"  # the shortened answer lost "retries"
    assert cases.text("alpha", "keep 0.2 correct") == "✓"
    assert cases.text("beta", "keep 0.2 correct") == "–"  # no expected answers
    assert cases.text("beta", "keep 0.3 TTFT") == "1.00 s"
    assert cases.text("alpha", "keep 0.2 agreement") == format_percent(
        answer_agreement(BASELINE_ANSWER, SPEC_ANSWER)
    )
    assert cases.text("alpha", "keep 0.1 agreement") == format_percent(
        answer_agreement(BASELINE_ANSWER, spec_answer(0.1))
    )

    summary = tab.results.summary
    assert summary.text("baseline", "accuracy") == "100.0% (1/1)"  # as the CLI and the HTML report read it
    assert summary.text("keep 0.1", "accuracy") == "0.0% (0/1)"
    assert summary.text("keep 0.2", "mean TTFT") == "1.00 s"
    assert summary.text("keep 0.2", "speed-up") == "4.00×"
    assert summary.text("baseline", "mean TTFT") == "4.00 s"
    plots = tab.results.plots
    for label in (plots.quality, plots.ttft):
        assert plots.plot(label).width() > 200 and not label.pixmap().isNull()
    assert tab.run_button.isEnabled() and not tab.cancel_button.isEnabled()
    assert tab.results.export_html_button.isEnabled()


def test_one_engine_job_at_a_time(loaded_window, qtbot, suite_file, fake_config):
    window, tab = loaded_window, loaded_window.ab_tab
    tab.suite.open_suite(suite_file)
    fake_config.draft_step_s = 0.05
    tab.run_button.click()
    assert window.ab.is_active
    for button in (*window.controls.run_buttons, tab.run_button, tab.quick_button):
        assert not button.isEnabled()
    assert window.controls.compare_button.toolTip() == "An A/B suite is running"
    assert window.start_run("both") is False
    tab.cancel_button.click()
    wait_ab_done(qtbot, window, timeout=1000)
    window.controls.spec_button.click()
    assert window.runs.is_active
    assert not tab.run_button.isEnabled() and tab.run_button.toolTip() == "A run is in progress"
    assert window.start_ab("again", load_suite(suite_file), ["0.2"]) is False
    wait_run_done(qtbot, window)
    assert tab.run_button.isEnabled()


def test_cancel_mid_suite_stops_within_a_second_and_the_app_stays_usable(
    loaded_window, qtbot, suite_file, engine_factory, fake_config
):
    window, tab = loaded_window, loaded_window.ab_tab
    tab.suite.open_suite(suite_file)
    fake_config.draft_steps, fake_config.draft_step_s = 200, 0.05  # a 10 s draft stage
    tab.run_button.click()
    qtbot.waitUntil(lambda: engine_factory.engine.current_stage == "draft", timeout=5000)
    started = time.monotonic()
    tab.cancel_button.click()
    wait_ab_done(qtbot, window, timeout=1000)
    assert time.monotonic() - started < 1.0
    assert tab.progress_label.text() == "cancelled"
    assert tab.results.title.text() == "Results: suite.jsonl (cancelled; the finished runs are shown)"
    assert tab.results.cases.text("alpha", "baseline TTFT") == "4.00 s"  # finished before the cancel
    assert tab.results.cases.text("alpha", "keep 0.1 TTFT") == "–"
    assert not tab.results.export_html_button.isEnabled()
    # The engine is free again: a normal compare runs to the end.
    fake_config.draft_steps, fake_config.draft_step_s = 6, 0.01
    window.controls.compare_button.click()
    wait_run_done(qtbot, window)
    assert window.baseline_pane.ttft.text() == "4.00 s" and window.spec_pane.ttft.text() == "1.00 s"


def test_a_case_that_cannot_load_shows_as_failed_and_the_suite_goes_on(
    window, qtbot, suite_file, fake_config
):
    fake_config.make_fast()
    tab = window.ab_tab
    tab.suite.open_suite(suite_file)
    (suite_file.parent / "docs" / "a.txt").unlink()  # the first case fails; the second still runs
    tab.run_button.click()
    wait_ab_done(qtbot, window)
    assert tab.progress_label.text() == "done · 1 case failed"
    assert tab.message.text().startswith("case 'alpha' (suite line 1): no such file or folder")
    assert "#b91c1c" in tab.message.styleSheet()
    cases = tab.results.cases
    assert (
        cases.text("alpha", "baseline TTFT") == "error" and cases.text("alpha", "keep 0.3 correct") == "error"
    )
    assert cases.text("beta", "keep 0.3 TTFT") == "1.00 s"
    assert tab.results.title.text() == "Results: suite.jsonl (1 case failed)"
    assert tab.results.summary.text("keep 0.2", "speed-up") == "4.00×"  # the figures of the case that ran
    assert tab.results.export_csv_button.isEnabled() and tab.run_button.isEnabled()


def test_export_html_and_csv(window, qtbot, suite_file, fake_config, monkeypatch, tmp_path):
    fake_config.make_fast()
    tab = window.ab_tab
    tab.suite.open_suite(suite_file)
    assert not tab.results.export_csv_button.isEnabled()
    tab.run_button.click()
    wait_ab_done(qtbot, window)
    html_path, csv_path = tmp_path / "out" / "report.html", tmp_path / "out" / "runs.csv"
    html_path.parent.mkdir()
    save_dialog_returns(monkeypatch, html_path)
    tab.results.export_html_button.click()
    save_dialog_returns(monkeypatch, csv_path)
    tab.results.export_csv_button.click()
    html = html_path.read_text(encoding="utf-8")
    assert "alpha" in html and "beta" in html and html.count("data:image/png;base64,") == 2
    rows = csv_path.read_text(encoding="utf-8").splitlines()
    assert rows[0] == ",".join(CSV_COLUMNS)
    assert (
        sum(row.startswith("alpha,") for row in rows) == 4
        and sum(row.startswith("beta,") for row in rows) == 4
    )
    assert tab.message.text() == f"Wrote {csv_path}"
    save_dialog_returns(monkeypatch, tmp_path / "missing" / "runs.csv")
    tab.results.export_csv_button.click()
    assert tab.message.text().startswith(f"Could not write {tmp_path / 'missing' / 'runs.csv'}")


def test_quick_check_runs_the_open_question_at_three_keeps(notes_window, qtbot, engine_factory, fake_config):
    window, tab = notes_window, notes_window.ab_tab
    fake_config.make_fast()
    assert tab.quick_button.isEnabled()
    tab.quick_button.click()
    wait_ab_done(qtbot, window)
    requests = engine_factory.engine.requests
    assert [(r["mode"], r["settings"].keep) for r in requests][-4:] == [
        ("baseline", 0.2),
        ("spec", 0.1),
        ("spec", 0.2),
        ("spec", 0.3),
    ]
    assert {r["question"] for r in requests} == {"What does the parser retry?"}
    assert tab.results.title.text() == "Results: quick check of notes.txt"
    cases = tab.results.cases
    for keep in ("0.1", "0.2", "0.3"):
        assert cases.text("quick-check", f"keep {keep} TTFT") == "1.00 s"
        assert cases.text("quick-check", f"keep {keep} agreement").endswith("%")
    assert cases.text("quick-check", "keep 0.1 agreement") != cases.text("quick-check", "keep 0.2 agreement")
    assert tab.results.summary.text("keep 0.3", "speed-up") == "4.00×"
    assert tab.suite.table.rowCount() == 0  # the suite being built is untouched


def test_quick_check_needs_a_document_and_a_question(window, qtbot, notes_txt):
    tab = window.ab_tab
    assert not tab.quick_button.isEnabled()
    window.open_path(str(notes_txt))
    qtbot.waitUntil(lambda: window.documents.document is not None, timeout=3000)
    assert not tab.quick_button.isEnabled()
    window.question.set_question("Anything?")
    assert tab.quick_button.isEnabled()


# --- reusing document caches -----------------------------------------------------------------------


def test_the_reuse_cache_box_is_off_by_default_and_goes_into_the_request(window):
    tab = window.ab_tab
    box = tab.findChild(QCheckBox, "abReuseCache")
    assert box is tab.reuse_cache_box and box.text() == "Reuse document caches (cached TTFTs labelled)"
    assert not box.isChecked() and tab.request("t", [], ["0.1"], RunSettings()).reuse_cache is False
    box.setChecked(True)
    request = tab.request("suite.jsonl", [], ["0.1", "0.2"], RunSettings(max_new_tokens=7))
    assert (
        request.reuse_cache is True
        and request.keeps == ["0.1", "0.2"]
        and request.settings.max_new_tokens == 7
    )


def test_a_suite_reusing_document_caches_labels_its_cached_runs(
    window, qtbot, suite_file, engine_factory, fake_config
):
    fake_config.make_fast()
    write_suite(suite_file, [*CASES, {**CASES[0], "id": "gamma", "question": "What else does it retry?"}])
    tab = window.ab_tab
    tab.suite.open_suite(suite_file)
    tab.reuse_cache_box.setChecked(True)
    assert window.ab.start(tab.request(tab.suite.name, tab.suite.cases, ["0.1", "0.2"], RunSettings()))
    wait_ab_done(qtbot, window)

    requests = engine_factory.engine.requests
    assert requests and all("session" in r for r in requests)  # every run asked in a document session
    assert [(r["question"], r["mode"]) for r in requests[:2]] == [
        ("What does the parser retry?", "baseline"),
        ("What else does it retry?", "baseline"),
    ]
    cases = tab.results.cases
    assert cases.text("alpha", "baseline TTFT") == "4.00 s"  # the document's first question: cold
    assert cases.text("gamma", "baseline TTFT") == "400 ms (cached: full prefill from the cache)"
    assert cases.text("gamma", "keep 0.1 TTFT") == "1.00 s"
    summary = tab.results.summary
    assert summary.text("baseline", "mean TTFT") == "4.00 s"  # cold runs only: alpha and beta
    assert summary.text("baseline", "cached runs") == "1"
    assert summary.text("baseline", "cached mean TTFT") == "400 ms"
    assert summary.text("keep 0.2", "speed-up") == "4.00×"


def test_a_suite_without_the_box_runs_cold_and_shows_no_cached_columns(
    window, qtbot, suite_file, engine_factory, fake_config
):
    fake_config.make_fast()
    tab = window.ab_tab
    tab.suite.open_suite(suite_file)
    tab.run_button.click()
    wait_ab_done(qtbot, window)
    assert not any("session" in r for r in engine_factory.engine.requests)
    with pytest.raises(KeyError):
        tab.results.summary.text("baseline", "cached runs")
