"""`specprefill ab --reuse-cache` on the tiny random target/draft pair (a real Engine and real sessions).

With the flag, a document's questions share one DocumentSession: its first baseline is a cold
full prefill, the next ones are served from the cached prefix. Those cached TTFTs are labelled
and averaged apart; the mean TTFTs and speed-ups stay over cold runs only. Without the flag the
suite runs one-shot, exactly as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.core.paths import state_cache_dir
from engine.core.settings import ModelSettings, RunSettings
from engine.eval.ab import run_suite_report
from engine.eval.report import CSV_COLUMNS, render_csv
from engine.eval.results import AbReport, RunRecord
from engine.eval.suite import load_suite
from engine.pipeline.state_store import StateStore, cap_bytes

KEEPS = ["0.25", "0.5"]
SETTINGS = RunSettings(force=True, chunk_size=8, max_new_tokens=4)  # force: the tiny prompts are short
STONES = " ".join(f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(8))
COINS = " ".join(f"Box {i} holds {i * 7} coins." for i in range(10))
# Two documents, two questions each, interleaved: each document's questions are still asked together.
CASES = [
    ("stone-green", "stones.txt", "Which item is the green stone?"),
    ("coins-3", "coins.txt", "How many coins are in box 3?"),
    ("stone-where", "stones.txt", "Where are the stones?"),
    ("coins-most", "coins.txt", "Which box holds the most coins?"),
]
FIRST_OF_EACH_DOCUMENT = {"stone-green", "coins-3"}
COLD = {
    "cold_full",
    "spec",
}  # a session's prefills paid in full; the other served_by values came from a cache


@pytest.fixture(autouse=True)
def no_saved_states(engine, monkeypatch):
    """The prefix in memory is what is measured here; saved states have a test of their own below."""
    monkeypatch.setattr(engine, "state_store", None)


@pytest.fixture
def suite(tmp_path) -> Path:
    (tmp_path / "stones.txt").write_text(STONES, encoding="utf-8")
    (tmp_path / "coins.txt").write_text(COINS, encoding="utf-8")
    lines = [
        json.dumps({"id": case_id, "doc": doc, "question": question, "answers": ["stone", "coins"]})
        for case_id, doc, question in CASES
    ]
    path = tmp_path / "suite.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(engine, suite: Path, reuse_cache: bool) -> AbReport:
    return run_suite_report(engine, load_suite(suite), KEEPS, SETTINGS, reuse_cache=reuse_cache)


def mean_ttft(runs: list[RunRecord]) -> float:
    return sum(r.result.ttft_s for r in runs) / len(runs)


def test_a_documents_follow_up_baseline_is_served_from_its_cache(engine, suite):
    report = run(engine, suite, reuse_cache=True)
    assert [case.id for case in report.cases] == [case_id for case_id, *_ in CASES]  # the suite's order
    served = {case.id: case.baseline.result.served_by for case in report.cases}
    assert served == {
        "stone-green": "cold_full",
        "coins-3": "cold_full",
        "stone-where": "cached_full",
        "coins-most": "cached_full",
    }
    # The first SpecPrefill run of a document scores it cold; later ones may reuse the draft's cache.
    spec_served = {run.result.served_by for case in report.cases for run in case.spec.values()}
    assert "spec" in spec_served and spec_served <= {"spec", "spec_cached_draft"}
    assert report.environment.reuse_cache is True


def test_cold_means_use_only_the_cold_runs_and_cached_runs_have_their_own(engine, suite):
    report = run(engine, suite, reuse_cache=True)
    baselines = [case.baseline for case in report.cases]
    cold, cached = split(baselines)
    assert len(cold) == len(cached) == 2
    baseline = report.summary.overall.baseline
    assert baseline.mean_ttft_s == pytest.approx(mean_ttft(cold))
    assert baseline.mean_target_prefill_s == pytest.approx(sum(r.result.target_prefill_s for r in cold) / 2)
    assert baseline.n_cached == 2 and baseline.cached_mean_ttft_s == pytest.approx(mean_ttft(cached))
    assert baseline.n_scored == 4  # accuracy is over every run, cached ones included
    for keep in KEEPS:
        spec = report.summary.overall.spec[keep]
        spec_cold, spec_cached = split([case.spec[keep] for case in report.cases])
        assert spec.n_cached == len(spec_cached) and spec.n_scored == 4
        assert spec.mean_ttft_s == (pytest.approx(mean_ttft(spec_cold)) if spec_cold else None)
        assert spec.cached_mean_ttft_s == (pytest.approx(mean_ttft(spec_cached)) if spec_cached else None)
        assert spec.speedup == (pytest.approx(mean_ttft(cold) / mean_ttft(spec_cold)) if spec_cold else None)
    data = report.to_json()
    assert (
        data["summary"]["baseline"]["n_cached"] == 2 and "cached_mean_ttft_s" in data["summary"]["baseline"]
    )
    assert data["cases"][2]["baseline"]["served_by"] == "cached_full"
    rows = render_csv(report).splitlines()
    assert rows[0].endswith(",served_by,ttft_kind")
    assert sum(row.endswith(",cached_full,cached") for row in rows) == 2
    assert sum(row.endswith(",cold_full,cold") for row in rows) == 2


def split(runs: list[RunRecord]) -> tuple[list[RunRecord], list[RunRecord]]:
    """(cold runs, cached runs), by served_by."""
    return [r for r in runs if r.result.served_by in COLD], [
        r for r in runs if r.result.served_by not in COLD
    ]


def test_without_the_flag_every_run_is_one_shot_and_the_json_is_unchanged(engine, suite):
    report = run(engine, suite, reuse_cache=False)
    data = report.to_json()
    runs = [run for case in data["cases"] for run in [case["baseline"], *case["spec"].values()]]
    assert runs and not any("served_by" in run for run in runs)
    baseline, spec = data["summary"]["baseline"], data["summary"]["spec"][KEEPS[0]]
    # No session fields; the accuracy's 95% interval is there whenever a case is scored.
    assert set(baseline) == {
        "accuracy",
        "n_scored",
        "mean_ttft_s",
        "mean_tokenize_s",
        "mean_target_prefill_s",
        "accuracy_low",
        "accuracy_high",
    }
    assert set(spec) == set(baseline) | {
        "agreement",
        "mean_draft_s",
        "mean_select_s",
        "mean_kept_fraction",
        "speedup",
        "n_bypassed",
    }
    assert "reuse_cache" not in data["environment"]
    assert render_csv(report).splitlines()[0] == ",".join(CSV_COLUMNS)
    assert baseline["mean_ttft_s"] == pytest.approx(mean_ttft([case.baseline for case in report.cases]))


def test_a_saved_state_is_a_cached_run_too(engine, suite, tmp_path, monkeypatch):
    """A second suite finds each document's prefix saved by the first: no cold baseline is left to average."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(
        engine, "state_store", StateStore(state_cache_dir(), cap_bytes(ModelSettings().state_cache_gb))
    )
    run(engine, suite, reuse_cache=True)
    report = run(engine, suite, reuse_cache=True)
    served = {case.id: case.baseline.result.served_by for case in report.cases}
    assert {served[case_id] for case_id in FIRST_OF_EACH_DOCUMENT} == {"saved_state"}
    baseline = report.summary.overall.baseline
    assert baseline.n_cached == 4 and baseline.mean_ttft_s is None  # no cold baseline left to average
    assert all(spec.speedup is None for spec in report.summary.overall.spec.values())
