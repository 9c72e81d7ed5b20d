"""Typed A/B and bench reports: the JSON files written before them read back, and write out, unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.eval.bench import BenchReport
from engine.eval.results import AbReport

REPORTS = Path(__file__).resolve().parents[2] / "research"


def read(name: str) -> dict:
    return json.loads((REPORTS / name).read_text(encoding="utf-8"))


def test_a_saved_ab_report_round_trips_field_for_field():
    data = read("dev-suite/dev-suite-keep0.2.json")
    report = AbReport.from_json(data)
    assert report.to_json() == data
    assert json.dumps(report.to_json()) == json.dumps(data)  # the same field order, too


def test_a_saved_ab_report_reads_as_typed_figures():
    report = AbReport.from_json(read("dev-suite/dev-suite-keep0.2.json"))
    overall = report.summary.overall
    assert report.summary.keeps == ("0.2",) and overall.n_cases == 12 and overall.n_errors == 0
    assert overall.baseline.accuracy == 0.9 and overall.baseline.n_scored == 10
    assert overall.baseline.speedup is None and overall.spec["0.2"].speedup == pytest.approx(3.1886, abs=1e-4)
    assert set(report.summary.by_kind) == {"number", "fact", "code", "summary"}
    first = report.cases[0]
    assert first.id == "mpich-blcr-version" and first.answers == ("0.8.2",) and not first.failed
    assert first.baseline.correct is True and first.spec["0.2"].result.positions == "restore"
    assert (
        report.environment.target.default is True and report.environment.versions.llama_cpp_python == "0.3.36"
    )


def test_an_older_ab_report_still_reads():
    """dev-suite.json predates draft_window: it reads, and its summary and environment write out unchanged."""
    data = read("dev-suite/dev-suite.json")
    report = AbReport.from_json(data)
    written = report.to_json()
    assert written["summary"] == data["summary"] and written["environment"] == data["environment"]
    assert [c["id"] for c in written["cases"]] == [c["id"] for c in data["cases"]]


@pytest.mark.parametrize(
    "name",
    [
        "bench-mpfi/bench-mpfi-window.json",
        "bench-mpfi/bench-mpfi-bypass.json",
        "bench-mpfi/bench-mpfi-full-attention.json",
    ],
)
def test_a_saved_bench_report_round_trips_field_for_field(name):
    data = read(name)
    report = BenchReport.from_json(data)
    assert report.to_json() == data
    assert json.dumps(report.to_json()) == json.dumps(data)


def test_a_bench_report_reads_as_typed_rows():
    report = BenchReport.from_json(read("bench-mpfi/bench-mpfi-window.json"))
    assert [row.tokens for row in report.results] == [4096, 8192, 16384]
    assert report.keep == 0.2 and report.models.restore_supported is True
    assert report.results[-1].speedup == pytest.approx(3.913, abs=1e-3)


def test_a_bench_report_over_rpc_workers_records_the_backends_and_round_trips():
    data = read("flash-attention/bench-mpfi-8k-flash-off.json")
    data["models"]["target_backends"] = ["CPU", "RPC 127.0.0.1:50052", "RPC 127.0.0.1:50053"]
    report = BenchReport.from_json(data)
    assert report.models.target_backends == ("CPU", "RPC 127.0.0.1:50052", "RPC 127.0.0.1:50053")
    assert report.to_json() == data
    del data["models"]["target_backends"]
    assert "target_backends" not in BenchReport.from_json(data).to_json()["models"]  # older reports unchanged
