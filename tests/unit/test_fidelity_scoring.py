"""The fidelity suite's scoring: key points for summaries, Wilson intervals, `ab --only KIND`, `ab --keep …,auto`."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine.cli.ab import only_ids, only_kinds
from engine.core.events import RunFinished
from engine.core.settings import RunSettings
from engine.eval.ab import AbError, run_suite
from engine.eval.metrics import key_point_coverage, wilson_interval
from engine.eval.results import AbReport, CaseRecord, accuracy_text
from engine.eval.suite import SuiteError, load_suite
from tests.unit.test_suite_and_ab import KEEPS, SCRIPT, FakeEngine, case_line, write_suite


@pytest.mark.parametrize(
    "successes, n, low, high",
    [
        (9, 10, 0.5958, 0.9821),  # hand-checked against the Wilson formula
        (0, 5, 0.0, 0.4345),
        (5, 5, 0.5655, 1.0),
        (0, 0, 0.0, 1.0),  # nothing scored: no information
    ],
)
def test_wilson_interval(successes, n, low, high):
    assert wilson_interval(successes, n) == pytest.approx((low, high), abs=1e-4)


def test_key_point_coverage_counts_points_by_any_of_their_phrases():
    points = [["checkpoint", "checkpointing"], ["Hydra"], ["gforker"], ["PBS"]]
    assert key_point_coverage("It covers checkpointing and the Hydra process manager.", points) == 0.5
    assert key_point_coverage("Nothing relevant.", points) == 0.0


SUMMARY_POINTS = [["mpich"], ["guide"], ["hydra"], ["process manager"]]


@pytest.fixture
def suite(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "xfig.txt").write_text("The XFig grid is sixteen divisions to an inch. Use ferric chloride.")
    (docs / "mpich.txt").write_text("MPICH is an implementation of MPI. Hydra is its process manager.")
    return write_suite(
        tmp_path,
        [
            case_line(id="grid", doc="docs/xfig.txt", question="grid?", answers=["sixteen"], kind="number"),
            case_line(
                id="etchant",
                doc="docs/xfig.txt",
                question="etchant?",
                answers=["ferric chloride"],
                kind="fact",
            ),
            case_line(
                id="summary",
                doc="docs/mpich.txt",
                question="summary?",
                kind="summary",
                key_points=SUMMARY_POINTS,
            ),
        ],
    )


def test_summaries_are_scored_by_key_points_and_accuracy_has_its_interval(suite):
    events = list(run_suite(FakeEngine(), load_suite(suite), KEEPS, RunSettings(force=True)))
    report: AbReport = events[-1].report
    summary = report.summary.by_kind["summary"]
    # SCRIPT: the baseline and keep 0.1 say "a guide to mpich" (2 of 4 points), keep 0.5 says unrelated words
    assert summary.baseline.key_point_coverage == 0.5 and summary.spec["0.1"].key_point_coverage == 0.5
    assert summary.spec["0.5"].key_point_coverage == 0.0 and summary.baseline.n_key_point_cases == 1
    assert summary.baseline.accuracy is None and accuracy_text(summary.baseline) == "key points 50%"
    overall = report.summary.overall.baseline
    assert (overall.accuracy, overall.n_scored) == (1.0, 2)
    assert (overall.accuracy_low, overall.accuracy_high) == pytest.approx(wilson_interval(2, 2))
    assert accuracy_text(overall) == "100.0% (2/2) [34%–100%] · key points 50%"
    # The report's JSON carries the points and the hits, and reads back to the same report.
    data = json.loads(json.dumps(report.to_json()))
    (case,) = [c for c in data["cases"] if c["id"] == "summary"]
    assert case["key_points"] == SUMMARY_POINTS and case["baseline"]["key_points_hit"] == 0.5
    assert AbReport.from_json(data).to_json() == data
    assert CaseRecord.from_json(case).key_points == tuple(tuple(p) for p in SUMMARY_POINTS)


def test_a_case_without_key_points_writes_no_key_point_fields(suite):
    events = list(run_suite(FakeEngine(), load_suite(suite), KEEPS, RunSettings(force=True)))
    data = events[-1].report.to_json()
    (grid,) = [c for c in data["cases"] if c["id"] == "grid"]
    assert "key_points" not in grid and "key_points_hit" not in grid["baseline"]
    assert "key_point_coverage" not in data["summary"]["by_kind"]["number"]["baseline"]


def test_only_runs_the_kinds_asked_for_and_names_the_suites_kinds(suite):
    cases = load_suite(suite)
    assert [c.id for c in only_kinds(cases, "number,summary")] == ["grid", "summary"]
    assert only_kinds(cases, None) == cases
    with pytest.raises(
        AbError, match=r"no case of kind 'count' in the suite \(its kinds: fact, number, summary\)"
    ):
        only_kinds(cases, "number,count")


def test_cases_runs_the_ids_asked_for_in_suite_order_and_refuses_an_unknown_one(suite):
    cases = load_suite(suite)
    assert [c.id for c in only_ids(cases, "summary, grid")] == ["grid", "summary"]
    assert only_ids(cases, None) == cases
    with pytest.raises(AbError, match=r"no case with id 'gird' among the cases to run"):
        only_ids(cases, "grid,gird")
    with pytest.raises(AbError, match=r"no case with id 'grid' among the cases to run \(see --only\)"):
        only_ids(only_kinds(cases, "summary"), "grid")


def test_auto_runs_beside_fixed_keeps_and_is_summarized_under_its_name(suite):
    script = {**SCRIPT, **{(q, "auto"): SCRIPT[(q, "0.1")] for q in ("grid?", "etchant?", "summary?")}}

    class AutoEngine(FakeEngine):
        def stream(self, document, question, mode, settings, cancel=None):
            if settings.keep != "auto":
                yield from super().stream(document, question, mode, settings)
                return
            self.calls.append((document, question, mode, settings))
            answer, ttft = self.script[(question, "auto")]  # as keep 0.1 would, with auto's reason
            yield RunFinished(
                mode, replace(self._result(mode, "0.1", answer, ttft), keep_reason="concentrated")
            )

    events = list(run_suite(AutoEngine(script), load_suite(suite), ["0.1", "auto"], RunSettings(force=True)))
    data = events[-1].report.to_json()
    assert set(data["summary"]["spec"]) == {"0.1", "auto"}
    assert data["summary"]["spec"]["auto"]["mean_kept_fraction"] == pytest.approx(0.1)
    (grid,) = [c for c in data["cases"] if c["id"] == "grid"]
    assert grid["spec"]["auto"]["keep_reason"] == "concentrated"


def test_bad_key_points_are_refused_with_file_and_line(tmp_path):
    (tmp_path / "d.txt").write_text("text")
    path = write_suite(tmp_path, [case_line(id="s", doc="d.txt", question="q?", key_points=[[]])])
    with pytest.raises(SuiteError, match=r"suite.jsonl:1: field 'key_points' must be"):
        load_suite(path)
