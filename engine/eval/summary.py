"""An A/B suite's figures: accuracy, agreement and mean timings, overall and per kind.

Failed cases are counted (n_errors) and left out of every figure, so the baseline and
each keep are always compared over the same cases. Works on saved reports' cases too.

Runs served from a document's caches (`ab --reuse-cache`) count for accuracy and agreement
like any other, but their timings are averaged apart (cached_mean_*): the mean_* timings and
the speed-up are over cold runs only, so a cached TTFT never flatters them.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.eval.metrics import wilson_interval
from engine.eval.results import CaseRecord, GroupSummary, RunRecord, RunSummary, Summary

TIMINGS = ("ttft_s", "tokenize_s", "target_prefill_s")  # each also averaged apart over cached runs
SPEC_TIMINGS = (*TIMINGS, "draft_s", "select_s")


def summarize(records: Sequence[CaseRecord], keeps: Sequence[str]) -> Summary:
    return Summary(
        keeps=tuple(keeps),
        overall=summarize_group(records, keeps),
        by_kind={kind: summarize_group(group, keeps) for kind, group in _group_by_kind(records).items()},
    )


def summarize_group(records: Sequence[CaseRecord], keeps: Sequence[str]) -> GroupSummary:
    finished = [r for r in records if not r.failed]
    baseline = _baseline_summary(finished)
    return GroupSummary(
        n_cases=len(records),
        baseline=baseline,
        spec={keep: _spec_summary(finished, keep, baseline.mean_ttft_s) for keep in keeps},
        n_errors=len(records) - len(finished),
    )


def _baseline_summary(records: list[CaseRecord]) -> RunSummary:
    runs = [r.baseline for r in records]
    return RunSummary(
        "baseline", **_accuracy(runs), **_mean_timings(_cold(runs), TIMINGS), **_cached_timings(runs)
    )


def _spec_summary(records: list[CaseRecord], keep: str, baseline_ttft: float | None) -> RunSummary:
    runs = [r.spec[keep] for r in records]
    mean_ttft = mean([r.result.ttft_s for r in _cold(runs)])
    return RunSummary(
        "spec",
        **_accuracy(runs),
        agreement=mean([r.agreement for r in runs]),
        **_mean_timings(_cold(runs), SPEC_TIMINGS),
        **_cached_timings(runs),
        mean_kept_fraction=mean([r.result.kept_fraction for r in runs]),
        speedup=baseline_ttft / mean_ttft if baseline_ttft is not None and mean_ttft else None,
        n_bypassed=sum(1 for r in runs if r.result.bypassed),
    )


def _cold(runs: list[RunRecord]) -> list[RunRecord]:
    return [r for r in runs if not r.cached]


def _cached_timings(runs: list[RunRecord]) -> dict:
    """n_cached and the cached runs' own means; nothing for one-shot runs (no session served them)."""
    if not any(r.result.served_by for r in runs):
        return {}
    cached = [r for r in runs if r.cached]
    return {"n_cached": len(cached), **_mean_timings(cached, TIMINGS, prefix="cached_mean_")}


def _accuracy(runs: list[RunRecord]) -> dict:
    """Share of correct answers among runs whose case has expected answers (None when none has), its
    95% Wilson interval, and the mean key-point coverage of the runs whose case lists key points."""
    scored = [r.correct for r in runs if r.correct is not None]
    figures = {"accuracy": mean([1.0 if c else 0.0 for c in scored]), "n_scored": len(scored)}
    if scored:
        figures["accuracy_low"], figures["accuracy_high"] = wilson_interval(sum(scored), len(scored))
    hits = [r.key_points_hit for r in runs if r.key_points_hit is not None]
    if hits:
        figures.update(key_point_coverage=mean(hits), n_key_point_cases=len(hits))
    return figures


def _mean_timings(runs: list[RunRecord], names: tuple[str, ...], prefix: str = "mean_") -> dict:
    return {f"{prefix}{name}": mean([getattr(r.result, name) for r in runs]) for name in names}


def _group_by_kind(records: Sequence[CaseRecord]) -> dict[str, list[CaseRecord]]:
    groups: dict[str, list[CaseRecord]] = {}
    for record in records:
        groups.setdefault(record.kind, []).append(record)
    return groups


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
