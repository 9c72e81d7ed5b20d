"""One A/B suite at a time: engine.eval.ab.run_suite on the engine thread, its progress and rows back here.

The whole job runs on the engine host's thread, so it queues with normal runs and never
overlaps them: engine.eval.ab loads each case's document (engine.ingest), runs the baseline and
each keep, and at the end the same job scores the runs and draws the report's plots, so
the GUI thread only shows what comes back. A case that fails is shown as failed, and the
suite goes on.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from desktop.model.ab_records import AbOutcome, AbRequest, AbRow, CaseFailure, RowScorer, outcome_of
from desktop.sessions.engine_host import EngineHost, EngineLike
from desktop.sessions.job_session import EngineJobSession
from desktop.sessions.worker import WorkerContext
from engine.api import AbCaseDone, AbFinished, AbProgress, AbRunDone, run_suite

log = logging.getLogger(__name__)


def suite_job(engine: EngineLike, ctx: WorkerContext, request: AbRequest):
    """Forward progress, scored rows and failed cases; return the AbOutcome (a generator: the worker drains it)."""
    scorer = RowScorer(request.cases, request.keeps)
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
