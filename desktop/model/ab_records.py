"""An A/B suite's request and what comes back from it: each scored run, each failed case, and
the report with its plots. Plain data, shown by the A/B tab; desktop.sessions.ab_session runs it."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from engine.api import (
    AbReport,
    AbRunDone,
    Case,
    RunRecord,
    RunSettings,
    quality_plot_png,
    render_html,
    run_label,
    run_record,
    ttft_plot_png,
)


@dataclass(frozen=True)
class AbRequest:
    title: str  # what the results are of: a suite file's name, or "Quick check: <document>"
    cases: list[Case]
    keeps: list[str]
    settings: RunSettings  # every field but keep, which each SpecPrefill run sets
    reuse_cache: bool = (
        False  # one document session per document: cached runs labelled, kept out of cold means
    )


@dataclass(frozen=True)
class AbRow:
    """One finished run, scored as the report scores it: the answer, correct, agreement, timings."""

    case_id: str
    keep: str | None  # None: the baseline
    record: RunRecord


@dataclass(frozen=True)
class CaseFailure:
    """A case that failed: its runs that had not finished will not come."""

    case_id: str
    message: str  # names the case and its suite line


@dataclass(frozen=True)
class AbOutcome:
    report: AbReport
    quality_png: bytes
    ttft_png: bytes
    html: str  # the report page, rendered once here so exporting it is only a write


class RowScorer:
    """Turns AbRunDone events into AbRows; a case's baseline answer is the reference for its keeps."""

    def __init__(self, cases: list[Case], keeps: list[str]) -> None:
        self._answers = {case.id: case.answers for case in cases}
        self._key_points = {case.id: case.key_points for case in cases}
        self._keep_of_label = {run_label(keep): keep for keep in [None, *keeps]}
        self._baseline_answers: dict[str, str] = {}

    def score(self, done: AbRunDone) -> AbRow:
        keep = self._keep_of_label[done.label]
        if keep is None:
            self._baseline_answers[done.case_id] = done.result.answer
        reference = None if keep is None else self._baseline_answers[done.case_id]
        return AbRow(
            done.case_id,
            keep,
            run_record(done.result, self._answers[done.case_id], reference, self._key_points[done.case_id]),
        )


def outcome_of(report: AbReport) -> AbOutcome:
    summary = report.summary
    return AbOutcome(
        report,
        base64.b64decode(quality_plot_png(summary)),
        base64.b64decode(ttft_plot_png(summary)),
        render_html(report),
    )
