"""Documents longer than the target's window in the reports: `ab`, `bench`, `run` and `chat`
label a run that saw a cut document (truncated) or SpecPrefill's selection of it, and say how much
of the document it saw. Reports written before these fields still read back unchanged."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.cli.ab import format_summary, print_progress
from engine.cli.bench import bench_line
from engine.cli.chat import footer
from engine.cli.run import against, summary_line, whole_prompt_tokens
from engine.core.events import RunResult
from engine.core.settings import RunSettings
from engine.eval.ab import AbRunDone, build_report, run_suite_report
from engine.eval.ab_environment import describe_environment
from engine.eval.ab_records import case_record
from engine.eval.bench import BenchRow, bench_row, run_bench
from engine.eval.labels import fit_note, fit_tally, run_notes
from engine.eval.report import CSV_COLUMNS, FIT_CSV_COLUMNS, render_csv, render_html
from engine.eval.results import AbReport, RunRecord
from engine.eval.suite import Case, load_suite

REPORTS = Path(__file__).resolve().parents[2] / "research"
# ~1,500 tokens on the tiny pair: three times its 512-token window.
LONG_TEXT = " ".join(f"Line {i}: the amber key opens door {i * 7}." for i in range(160))
QUESTION = "Which key opens door 21?"
MAX_NEW = 8
SETTINGS = RunSettings(chunk_size=16, max_new_tokens=MAX_NEW, min_tokens=0)


def result(run: str = "baseline", **fields) -> RunResult:
    values = dict(
        run=run,
        answer="amber",
        prompt_tokens=600,
        prefill_tokens=600,
        ttft_s=1.0,
        decode_tok_s=10.0,
        generated_tokens=2,
        tokenize_s=0.1,
        target_prefill_s=0.8,
        document_tokens=2512,
    )
    values.update(fields)
    return RunResult(**values)


TRUNCATED = result(fit="truncated", seen_fraction=0.52, truncated_tokens=1200, prompt_tokens=1340)
SELECTED = result(
    "spec",
    fit="selected",
    seen_fraction=0.18,
    kept_fraction=0.15,
    positions="compress",
    prompt_tokens=2540,
    prefill_tokens=380,
)
FITS = result(document_tokens=500, prompt_tokens=528, prefill_tokens=528)


# -- the labels ----------------------------------------------------------------------------------
def test_fit_note_says_how_much_of_a_too_long_document_the_run_saw():
    assert fit_note(TRUNCATED) == "truncated: saw 52% of the document"
    assert fit_note(SELECTED) == "fit by selection: saw 18% of the document"
    assert fit_note(FITS) == ""
    assert fit_note(replace(SELECTED, seen_fraction=0.025)) == "fit by selection: saw 2.5% of the document"


def test_run_notes_put_the_fit_beside_cached_and_bypassed():
    assert run_notes(replace(TRUNCATED, served_by="cached_full")) == [
        "cached: full prefill from the cache",
        "truncated: saw 52% of the document",
    ]
    assert run_notes(FITS) == []


def test_fit_tally_counts_and_averages_the_runs_that_did_not_fit():
    assert fit_tally([TRUNCATED, replace(TRUNCATED, seen_fraction=0.48), FITS]) == (
        "2 of 3 runs truncated, seeing 50% of the document on average"
    )
    assert fit_tally([FITS, FITS]) == ""


def test_summary_line_of_a_selected_and_a_truncated_run():
    spec = replace(SELECTED, document_tokens=212_400)
    assert summary_line(spec).endswith(
        " | positions compress | fit by selection: saw 18% of 212,400 document tokens"
    )
    assert summary_line(TRUNCATED).endswith(
        " | TRUNCATED: 1200 document tokens cut, saw 52% of 2,512 document tokens"
    )
    assert "saw" not in summary_line(FITS) and "TRUNCATED" not in summary_line(FITS)


def test_run_reports_the_whole_prompt_and_qualifies_the_speed_up():
    assert whole_prompt_tokens({"baseline": TRUNCATED, "spec": SELECTED}) == 2540
    assert whole_prompt_tokens({"baseline": FITS}) == 528
    assert against(TRUNCATED) == " (against a baseline that was truncated: saw 52% of the document)"
    assert against(FITS) == ""


def test_chat_footer_says_a_selected_answer_saw_part_of_the_document():
    line = footer(replace(SELECTED, served_by="spec"))
    assert "served by spec" in line and "fit by selection: saw 18% of 2,512 document tokens" in line
    assert "saw" not in footer(replace(FITS, served_by="cold_full"))


# -- ab reports: table, progress, CSV, HTML ------------------------------------------------------------
def long_report(tmp_path: Path, baseline: RunResult = TRUNCATED, spec: RunResult = SELECTED) -> AbReport:
    case = Case(
        id="long", doc=tmp_path / "long.txt", question=QUESTION, answers=("amber",), kind="fact", line=1
    )
    record = case_record(case, baseline, {"0.2": spec})
    return build_report([record], ["0.2"], describe_environment(_FakeEngine(), SETTINGS, [record]))


def fitting_report(tmp_path: Path) -> AbReport:
    """A report whose document fit: no fit label anywhere."""
    return long_report(tmp_path, FITS, replace(FITS, run="spec"))


class _FakeEngine:
    """What describe_environment reads of an engine."""

    info = SimpleNamespace(
        target_name="target",
        draft_name="draft",
        target_path=Path("/models/t.gguf"),
        draft_path=Path("/models/d.gguf"),
        device="cpu",
        positions_supported=True,
        n_ctx=512,
    )


def test_a_case_record_counts_the_whole_prompt_not_the_cut_one(tmp_path):
    assert long_report(tmp_path).cases[0].prompt_tokens == SELECTED.prompt_tokens


def test_the_ab_table_and_progress_label_runs_that_did_not_fit(tmp_path, capsys):
    table = format_summary(long_report(tmp_path))
    assert "documents longer than the context window" in table
    assert "  baseline: 1 of 1 run truncated, seeing 52% of the document on average" in table
    assert "  keep 0.2: 1 of 1 run fit by selection, seeing 18% of the document on average" in table
    assert "longer than the context window" not in format_summary(fitting_report(tmp_path))
    print_progress(AbRunDone("long", "baseline", TRUNCATED))
    assert "baseline: TTFT 1.00 s (truncated: saw 52% of the document)" in capsys.readouterr().err


def test_the_csv_carries_the_fit_and_its_label_only_when_a_document_did_not_fit(tmp_path):
    rows = list(csv.DictReader(io.StringIO(render_csv(long_report(tmp_path)))))
    assert tuple(rows[0]) == (*CSV_COLUMNS, *FIT_CSV_COLUMNS)
    base, spec = rows
    assert (base["fit"], base["seen_fraction"], base["document_tokens"]) == ("truncated", "0.52", "2512")
    assert base["fit_note"] == "truncated: saw 52% of the document"
    assert spec["fit_note"] == "fit by selection: saw 18% of the document"
    fitting = render_csv(fitting_report(tmp_path))
    assert fitting.splitlines()[0] == ",".join(CSV_COLUMNS)  # the columns it always had


def test_the_html_labels_each_run_and_explains_the_cut(tmp_path):
    page = render_html(long_report(tmp_path))
    assert '<span class="tag">truncated: saw 52% of the document</span>' in page
    assert '<span class="tag">fit by selection: saw 18% of the document</span>' in page
    assert "1 of 1 run truncated, seeing 52% of the document on average" in page
    assert "saw" not in render_html(fitting_report(tmp_path))


def test_a_report_with_the_fit_fields_reads_back_unchanged(tmp_path):
    report = long_report(tmp_path)
    data = json.loads(json.dumps(report.to_json()))
    assert (
        data["cases"][0]["baseline"]["fit"] == "truncated"
        and data["cases"][0]["spec"]["0.2"]["fit"] == "selected"
    )
    assert AbReport.from_json(data) == report and AbReport.from_json(data).to_json() == data


def test_an_old_report_without_the_fit_fields_loads_as_fitting_and_writes_out_unchanged():
    data = json.loads((REPORTS / "dev-suite" / "dev-suite-keep0.2.json").read_text(encoding="utf-8"))
    assert "fit" not in data["cases"][0]["baseline"]
    report = AbReport.from_json(data)
    runs = [run for case in report.cases for _, run in case.runs()]
    assert all(
        run.result.fit == "fits" and run.result.seen_fraction == 1.0 and not run.fit_note for run in runs
    )
    assert not report.has_unfit_runs and report.fit_tallies() == {}
    assert report.to_json() == data
    assert RunRecord.from_json(data["cases"][0]["baseline"], "baseline").result.document_tokens == 0


def test_a_bench_row_carries_each_runs_fit_and_an_old_one_reads_without_it():
    row = bench_row(2500, TRUNCATED, SELECTED)
    data = row.to_json()
    assert {k: data[k] for k in BenchRow.FIT_FIELDS} == {
        "document_tokens": 2512,
        "baseline_fit": "truncated",
        "baseline_seen_fraction": 0.52,
        "spec_fit": "selected",
        "spec_seen_fraction": 0.18,
    }
    assert BenchRow.from_json(data) == row
    line = bench_line(row)
    assert line.endswith(
        " | baseline truncated: saw 52% of the document | spec fit by selection: saw 18% of the document"
    )
    old = {k: v for k, v in data.items() if k not in BenchRow.FIT_FIELDS}
    assert BenchRow.from_json(old).to_json() == old
    assert "saw" not in bench_line(BenchRow.from_json(old))


# -- on the tiny pair (n_ctx 512) ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def long_suite(engine, tmp_path_factory) -> Path:
    assert engine.count_tokens(LONG_TEXT) > 2 * engine.info.n_ctx, "the test document must not fit the window"
    folder = tmp_path_factory.mktemp("long-suite")
    (folder / "long.txt").write_text(LONG_TEXT, encoding="utf-8")
    suite = folder / "suite.jsonl"
    suite.write_text(
        json.dumps({"id": "long", "doc": "long.txt", "question": QUESTION, "answers": ["amber"]}) + "\n",
        encoding="utf-8",
    )
    return suite


@pytest.mark.parametrize("reuse_cache", [False, True])
def test_ab_cuts_an_over_long_document_for_the_baseline_instead_of_failing(engine, long_suite, reuse_cache):
    report = run_suite_report(engine, load_suite(long_suite), ["0.2"], SETTINGS, reuse_cache=reuse_cache)
    (case,) = report.cases
    assert not case.failed, case.error
    base, spec = case.baseline.result, case.spec["0.2"].result
    assert base.fit == "truncated" and base.truncated_tokens > 0 and 0 < base.seen_fraction < 1
    assert spec.fit == "selected" and 0 < spec.seen_fraction < 1
    assert base.document_tokens == spec.document_tokens > 2 * engine.info.n_ctx
    assert case.prompt_tokens == spec.prompt_tokens > engine.info.n_ctx
    assert (
        report.environment.settings["truncate"] is False
    )  # the suite's settings; the baseline cut on its own
    assert case.baseline.fit_note.startswith("truncated: saw ")
    assert "fit_note" in render_csv(report).splitlines()[0]


def test_bench_measures_a_length_longer_than_the_window(engine):
    settings = replace(SETTINGS, force=True)
    rows = [item for item in run_bench(engine, LONG_TEXT, [1200], settings) if isinstance(item, BenchRow)]
    (row,) = rows
    data = row.to_json()
    assert data["baseline_fit"] == "truncated" and data["spec_fit"] == "selected"
    assert data["document_tokens"] > engine.info.n_ctx and 0 < data["baseline_seen_fraction"] < 1
    assert " | baseline truncated: saw " in bench_line(
        row
    ) and " | spec fit by selection: saw " in bench_line(row)
