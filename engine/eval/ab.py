"""A/B evaluation: each suite case runs the baseline once, then SpecPrefill at each keep value.

    for event in run_suite(engine, cases, ["0.1", "0.2"], settings, cancel):
        ...  # AbProgress before each run, AbRunDone after it, AbCaseDone after each case, AbFinished last

By default every run is a cold one-shot `Engine.stream`. With `reuse_cache`, each document's
cases share one DocumentSession (`Engine.ask`): the document's baselines run first (the first
cold, the next from its cached prefix), then each case's keeps; every run says how it was
served (`served_by`), and the summary keeps cached TTFTs out of the cold means.

A document longer than the target's window is cut to fit for the baseline (the full prefill a
user gets without SpecPrefill), and SpecPrefill fits it by its selection: each run says so
(`fit`, `seen_fraction`), and the report labels them. Keep values stay the strings the user
typed: they are the keys of the report. A case that fails (its document cannot be read, its
question alone does not fit...) becomes a case record with
its error, and the suite goes on. The report is typed (engine.eval.results), with the JSON
reports have always had, so report.py and the GUI read a saved one as easily as a fresh one.
Each case's record is built by engine.eval.ab_records, the environment by engine.eval.ab_environment.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import SettingsError, SpecPrefillError
from engine.core.events import RunFinished, RunResult
from engine.core.setting_schema import describe, option_of
from engine.core.settings import AUTO_KEEP, RunSettings, greedy
from engine.eval.ab_environment import describe_environment
from engine.eval.ab_records import carried_runs, case_record, failed_case_record, rescored
from engine.eval.labels import run_label
from engine.eval.results import AbReport, CaseRecord, Environment
from engine.eval.suite import Case
from engine.eval.summary import summarize
from engine.ingest import Document, load_document
from engine.pipeline.session import DocumentSession

if TYPE_CHECKING:
    from engine.pipeline import Engine

log = logging.getLogger(__name__)

DEFAULT_KEEPS = "0.1,0.2,0.3"


class AbError(SpecPrefillError):
    """A bad keep list, a journal that does not match the suite, or an output that cannot be written."""


# -- events --------------------------------------------------------------------
@dataclass(frozen=True)
class AbProgress:
    """Sent before each run: which case and run comes next, and how far along the suite is."""

    case_number: int  # 1-based
    n_cases: int
    case_id: str
    label: str  # "baseline" or "keep 0.2"
    runs_done: int
    runs_total: int  # the runs still to do when the suite started, less those of failed cases
    elapsed_s: float
    eta_s: float | None  # None until one run has finished

    @property
    def fraction(self) -> float:
        return self.runs_done / self.runs_total if self.runs_total else 1.0


@dataclass(frozen=True)
class AbRunDone:
    case_id: str
    label: str
    result: RunResult


@dataclass(frozen=True)
class AbCaseDone:
    """Sent after each case, finished or failed: its record, ready for the journal."""

    record: CaseRecord
    line: int  # the case's line in the suite file

    @property
    def failure(self) -> str | None:
        """Why the case failed, naming it and its line; None when it finished."""
        if not self.record.failed:
            return None
        return f"case {self.record.id!r} (suite line {self.line}): {self.record.error}"


@dataclass(frozen=True)
class AbFinished:
    report: AbReport


AbEvent = AbProgress | AbRunDone | AbCaseDone | AbFinished


# -- keep list -------------------------------------------------------------------
def parse_keeps(text: str) -> list[str]:
    """'0.1,0.2' -> ['0.1', '0.2'], each checked to be a number in (0, 1]."""
    return validate_keeps([part.strip() for part in text.split(",")])


def validate_keeps(keeps: list[str]) -> list[str]:
    if not keeps:
        raise AbError("the keep list is empty")
    for keep in keeps:
        _check_keep(keep)
    duplicates = sorted({k for k in keeps if keeps.count(k) > 1})
    if duplicates:
        raise AbError(f"keep {duplicates[0]} is listed twice")
    return keeps


def _check_keep(keep: str) -> None:
    """The settings schema's keep range, on the value as typed (so "2" reads "got 2", not "got 2.0")."""
    if keep == AUTO_KEEP:
        return
    try:
        value = _number(keep)
    except ValueError:
        raise AbError(f"keep must be a number in (0, 1] or {AUTO_KEEP}, got {keep!r}") from None
    option = option_of(RunSettings, "keep")
    try:
        option.check(describe("keep", option), value)
    except SettingsError as e:
        raise AbError(str(e)) from None


def keep_setting(keep: str) -> float | str:
    """A keep as typed, as RunSettings takes it: auto as it is, a fraction as a number."""
    return keep if keep == AUTO_KEEP else float(keep)


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


# -- running -----------------------------------------------------------------------
def run_suite(
    engine: Engine,
    cases: list[Case],
    keeps: list[str],
    settings: RunSettings,
    cancel: CancelToken = NEVER,
    *,
    password: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    finished: Mapping[str, CaseRecord] | None = None,
    reuse_cache: bool = False,
) -> Iterator[AbEvent]:
    """Run every case (baseline, then each keep) and finish with the report.

    `settings` applies to every run except its `keep`, which each SpecPrefill run replaces:
    the caller decides force/min_tokens, and bypassed runs are recorded as such.
    `finished` holds records of cases already run (a resumed suite): their runs are not run again; a
    record that lacks some of `keeps` (a journal made with fewer) runs only those. Every answer is
    scored again, so a resumed report grades old and new runs alike.
    `reuse_cache`: the cases about one document share a DocumentSession (Engine.ask), so its
    follow-up questions are served from the document's caches; their runs say so (served_by).
    Without it every run is a cold one-shot `Engine.stream`.
    """
    validate_keeps(keeps)
    settings = greedy(settings)  # an A/B compares like with like: every run decodes greedily
    finished = finished or {}
    carried = {case.id: carried_runs(finished.get(case.id), case, keeps) for case in cases}
    done = {
        case.id: rescored(case, carried[case.id], keeps)
        for case in cases
        if len(carried[case.id]) == 1 + len(keeps)
    }
    todo = [(number, case) for number, case in enumerate(cases, start=1) if case.id not in done]
    runner = _CaseRunner(engine, keeps, settings, cancel, password, carried)
    tracker = _ProgressTracker(
        len(cases), sum(1 + len(keeps) - len(carried[case.id]) for _, case in todo), clock
    )
    run_all = runner.by_document if reuse_cache else runner.one_shot
    new: dict[str, CaseRecord] = {}
    for event in run_all(todo, tracker):
        if isinstance(event, AbCaseDone):
            new[event.record.id] = event.record
        yield event
    records = [done[case.id] if case.id in done else new[case.id] for case in cases]  # the suite's order
    environment = describe_environment(engine, settings, records, reuse_cache=reuse_cache)
    yield AbFinished(build_report(records, keeps, environment))


def run_suite_report(
    engine: Engine,
    cases: list[Case],
    keeps: list[str],
    settings: RunSettings,
    cancel: CancelToken = NEVER,
    on_progress: Callable[[AbProgress | AbRunDone], None] | None = None,
    *,
    password: str | None = None,
    reuse_cache: bool = False,
) -> AbReport:
    """run_suite for callers that only want the report; `on_progress` sees each run's progress and result."""
    for event in run_suite(
        engine, cases, keeps, settings, cancel, password=password, reuse_cache=reuse_cache
    ):
        if isinstance(event, AbFinished):
            return event.report
        if on_progress and isinstance(event, (AbProgress, AbRunDone)):
            on_progress(event)
    raise AbError("the suite ended without a report")  # unreachable: run_suite always finishes with one


def build_report(records: list[CaseRecord], keeps: list[str], environment: Environment) -> AbReport:
    return AbReport(summary=summarize(records, keeps), cases=tuple(records), environment=environment)


Numbered = tuple[int, Case]  # a case and its 1-based number in the suite
RunFn = Callable[[Case, "str | None"], RunResult]  # runs one case's baseline (None) or keep


def document_key(case: Case) -> Path:
    """Which document a case asks about. The password is the suite's, so the resolved path alone says."""
    return Path(case.doc).resolve()


def group_by_document(todo: list[Numbered]) -> list[list[Numbered]]:
    """The cases about each document together, documents in order of first appearance, cases in suite order."""
    groups: dict[Path, list[Numbered]] = {}
    for number, case in todo:
        groups.setdefault(document_key(case), []).append((number, case))
    return list(groups.values())


class _CaseRunner:
    """Runs cases' baselines and keeps; an error becomes the case's record instead of ending the suite."""

    def __init__(
        self,
        engine: Engine,
        keeps: list[str],
        settings: RunSettings,
        cancel: CancelToken,
        password: str | None,
        carried: Mapping[str, dict[str | None, RunResult]] | None = None,
    ):
        self.engine, self.keeps, self.settings, self.cancel, self.password = (
            engine,
            keeps,
            settings,
            cancel,
            password,
        )
        self.carried = carried or {}  # by case id: the runs a resumed journal holds (None: the baseline)
        self.documents: dict[Path, Document] = {}  # each document is read once, whatever the number of cases
        self.sessions: dict[Path, DocumentSession] = {}  # with reuse_cache: one per document

    def one_shot(self, todo: list[Numbered], tracker: _ProgressTracker) -> Iterator[AbEvent]:
        """Each case in turn, every run a cold one-shot stream: the TTFTs the default report has always had."""
        for number, case in todo:
            results = self._carried(case)
            error = yield from self._attempt(
                case, number, self._lacking([None, *self.keeps], results), results, self._stream, tracker
            )
            yield self._case_done(case, results, error)

    def by_document(self, todo: list[Numbered], tracker: _ProgressTracker) -> Iterator[AbEvent]:
        """Document by document, each in one session (Engine.ask): its cases' runs share its caches."""
        for group in group_by_document(todo):
            yield from self._one_document(group, tracker)

    def _one_document(self, group: list[Numbered], tracker: _ProgressTracker) -> Iterator[AbEvent]:
        """The document's baselines first, then each case's keeps, then its record.

        Why this order: the baselines run back to back, the first cold and the next ones from the
        cached prefix, whether or not a SpecPrefill run in between would evict it; the SpecPrefill
        runs that follow can then reuse the document's draft cache.
        """
        results = {case.id: self._carried(case) for _, case in group}
        errors: dict[str, str | None] = {}
        for number, case in group:
            errors[case.id] = yield from self._attempt(
                case, number, self._lacking([None], results[case.id]), results[case.id], self._ask, tracker
            )
        for number, case in group:
            if errors[case.id] is None:  # a case whose baseline failed runs no keeps
                errors[case.id] = yield from self._attempt(
                    case,
                    number,
                    self._lacking(self.keeps, results[case.id]),
                    results[case.id],
                    self._ask,
                    tracker,
                )
            yield self._case_done(case, results[case.id], errors[case.id])

    def _carried(self, case: Case) -> dict[str | None, RunResult]:
        """The case's runs so far: those a resumed journal holds, the rest to come."""
        return dict(self.carried.get(case.id, {}))

    @staticmethod
    def _lacking(keeps: list[str | None], results: dict[str | None, RunResult]) -> list[str | None]:
        return [keep for keep in keeps if keep not in results]

    def _case_done(self, case: Case, results: dict[str | None, RunResult], error: str | None) -> AbCaseDone:
        """The case's record (or why it failed), its keeps in the suite's order whichever ran first."""
        ordered = {keep: results[keep] for keep in [None, *self.keeps] if keep in results}
        if error is not None:
            return AbCaseDone(failed_case_record(case, ordered, error), case.line)
        spec = {keep: result for keep, result in ordered.items() if keep is not None}
        return AbCaseDone(case_record(case, ordered[None], spec), case.line)

    def _attempt(
        self,
        case: Case,
        number: int,
        keeps: list[str | None],
        results: dict[str | None, RunResult],
        run: RunFn,
        tracker: _ProgressTracker,
    ) -> Iterator[AbEvent]:
        """Yield progress and each run of `keeps` (None: the baseline), adding them to `results`;
        return the error that stopped the case, or None."""
        try:
            for keep in keeps:
                yield tracker.before_run(number, case.id, run_label(keep))
                results[keep] = run(case, keep)
                tracker.run_finished()
                yield AbRunDone(case.id, run_label(keep), results[keep])
        except SpecPrefillError as e:
            log.warning("A/B case %r (suite line %d) failed: %s", case.id, case.line, e)
            tracker.runs_dropped(1 + len(self.keeps) - len(results))
            return str(e)
        return None

    def _document(self, case: Case) -> Document:
        if case.doc not in self.documents:
            self.documents[case.doc] = load_document(case.doc, password=self.password, cancel=self.cancel)
        return self.documents[case.doc]

    def _session(self, case: Case) -> DocumentSession:
        key = document_key(case)
        if key not in self.sessions:
            self.sessions[key] = DocumentSession(self._document(case))
        return self.sessions[key]

    def _stream(self, case: Case, keep: str | None) -> RunResult:
        events = self.engine.stream(
            self._document(case), case.question, _mode(keep), self._settings(keep), self.cancel
        )
        return _result_of(events, keep)

    def _ask(self, case: Case, keep: str | None) -> RunResult:
        events = self.engine.ask(
            self._session(case), case.question, _mode(keep), self._settings(keep), self.cancel
        )
        return _result_of(events, keep)

    def _settings(self, keep: str | None) -> RunSettings:
        if keep is None:
            # The baseline is the full prefill a user gets without SpecPrefill: a document longer than
            # the window is cut to fit (its result says "truncated"), so the case is compared, not lost.
            return replace(self.settings, truncate=True)
        return replace(self.settings, keep=keep_setting(keep))


def _mode(keep: str | None) -> str:
    return "baseline" if keep is None else "spec"


def _result_of(events: Iterable, keep: str | None) -> RunResult:
    """The run's result. The events are read to their end: the engine finishes what follows the
    answer (a session saves the document's prefix state) before the next run starts."""
    results = [event.result for event in events if isinstance(event, RunFinished)]
    if not results:
        raise AbError(f"the engine finished the {run_label(keep)} run without a result")
    return results[-1]


class _ProgressTracker:
    """Counts finished runs and turns elapsed time into an ETA."""

    def __init__(self, n_cases: int, runs_total: int, clock: Callable[[], float]):
        self.n_cases, self.runs_total, self.clock = n_cases, runs_total, clock
        self.started = clock()
        self.runs_done = 0

    def before_run(self, case_number: int, case_id: str, label: str) -> AbProgress:
        elapsed = self.clock() - self.started
        return AbProgress(
            case_number,
            self.n_cases,
            case_id,
            label,
            self.runs_done,
            self.runs_total,
            elapsed,
            estimate_remaining(elapsed, self.runs_done, self.runs_total),
        )

    def run_finished(self) -> None:
        self.runs_done += 1

    def runs_dropped(self, n: int) -> None:
        """A case failed: its runs that will not happen leave the total."""
        self.runs_total -= n


def estimate_remaining(elapsed_s: float, runs_done: int, runs_total: int) -> float | None:
    """Seconds left at the mean time per finished run; None before the first finishes."""
    if runs_done == 0:
        return None
    return elapsed_s / runs_done * (runs_total - runs_done)
