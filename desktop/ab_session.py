"""One A/B suite at a time: engine.eval.ab.run_suite on the engine thread, its progress and rows back here.

The whole job runs on the engine host's thread, so it queues with normal runs and never
overlaps them: engine.eval.ab loads each case's document (engine.ingest), runs the baseline and
each keep, and at the end the same job scores the runs and draws the report's plots, so
the GUI thread only shows what comes back. A case that fails is shown as failed, and the
suite goes on.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from desktop.engine_host import EngineHost, EngineLike
from desktop.job_session import EngineJobSession
from desktop.worker import WorkerContext
from engine.api import (
    AbCaseDone,
    AbFinished,
    AbProgress,
    AbReport,
    AbRunDone,
    Case,
    RunRecord,
    RunSettings,
    quality_plot_png,
    render_html,
    run_label,
    run_record,
    run_suite,
    ttft_plot_png,
)

log = logging.getLogger(__name__)


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


class _RowScorer:
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


def suite_job(engine: EngineLike, ctx: WorkerContext, request: AbRequest):
    """Forward progress, scored rows and failed cases; return the AbOutcome (a generator: the worker drains it)."""
    scorer = _RowScorer(request.cases, request.keeps)
    for event in run_suite(
        engine, request.cases, request.keeps, request.settings, ctx.cancel, reuse_cache=request.reuse_cache
    ):
        if isinstance(event, AbFinished):
            return outcome_of(event.report)
        if isinstance(event, AbRunDone):
            yield scorer.score(event)
        elif isinstance(event, AbCaseDone):
            if event.failure:
                yield CaseFailure(event.record.id, event.failure)
        else:
            yield event


def outcome_of(report: AbReport) -> AbOutcome:
    summary = report.summary
    return AbOutcome(
        report,
        base64.b64decode(quality_plot_png(summary)),
        base64.b64decode(ttft_plot_png(summary)),
        render_html(report),
    )


class AbSession(EngineJobSession):
    progress = Signal(object)  # engine.eval.ab.AbProgress, before each run
    row = Signal(object)  # AbRow after each run; CaseFailure when a case fails (its row shows it)

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(host, parent)
        self._outcome: AbOutcome | None = None

    @property
    def outcome(self) -> AbOutcome | None:
        """The report of the last suite that finished; None while one runs or after a cancel."""
        return self._outcome

    def start(self, request: AbRequest) -> bool:
        """Start a suite; refused (False) while one is active or without an engine."""
        log.info(
            "A/B %s: %d cases, keeps %s%s",
            request.title,
            len(request.cases),
            ",".join(request.keeps),
            ", reusing document caches" if request.reuse_cache else "",
        )
        return self._start(
            request, f"A/B suite {request.title}", lambda engine, ctx: suite_job(engine, ctx, request)
        )

    def _forget_results(self) -> None:
        self._outcome = None

    def _on_event(self, event: object) -> None:
        if isinstance(event, AbProgress):
            self.progress.emit(event)
        elif isinstance(event, (AbRow, CaseFailure)):
            self.row.emit(event)

    def _on_finished(self, outcome: AbOutcome) -> None:
        self._outcome = outcome
        super()._on_finished(outcome)
