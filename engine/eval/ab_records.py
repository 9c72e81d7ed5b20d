"""An A/B case's record from its runs, scored against its expected answers, the baseline's answer
and its key points; and which runs of a resumed journal's record a suite can carry over."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from engine.core.events import RunResult
from engine.eval.metrics import answer_agreement, is_correct, key_point_coverage
from engine.eval.results import CaseRecord, RunRecord
from engine.eval.suite import Case


def case_record(case: Case, baseline: RunResult, spec: dict[str, RunResult]) -> CaseRecord:
    # The whole prompt's tokens: a truncated baseline counts only what was left of it.
    prompt_tokens = max(result.prompt_tokens for result in [baseline, *spec.values()])
    return _record(
        case,
        prompt_tokens=prompt_tokens,
        baseline=run_record(baseline, case.answers, key_points=case.key_points),
        spec={
            keep: run_record(result, case.answers, baseline.answer, case.key_points)
            for keep, result in spec.items()
        },
    )


def rescored(case: Case, runs: Mapping[str | None, RunResult], keeps: list[str]) -> CaseRecord:
    """A finished case's record from its runs (None: the baseline), scored by today's metrics."""
    return case_record(case, runs[None], {keep: runs[keep] for keep in keeps})


def failed_case_record(case: Case, results: dict[str | None, RunResult], error: str) -> CaseRecord:
    """A case that failed part-way: the runs that finished, and why the next one did not."""
    baseline = results.get(None)
    spec = {keep: result for keep, result in results.items() if keep is not None}
    if baseline is None:
        return _record(case, prompt_tokens=None, baseline=None, spec={}, error=error)
    return replace(case_record(case, baseline, spec), error=error)


def _record(case: Case, **runs) -> CaseRecord:
    """The case's record: what the suite states of it, and `runs` (prompt_tokens, baseline, spec, error)."""
    return CaseRecord(
        id=case.id,
        kind=case.kind,
        question=case.question,
        answers=case.answers,
        doc=str(case.doc),
        key_points=case.key_points,
        **runs,
    )


def run_record(
    result: RunResult,
    answers: Iterable[str] | None,
    reference: str | None = None,
    key_points: Sequence[Sequence[str]] | None = None,
) -> RunRecord:
    """A run's timings and answer, scored against the expected answers, the baseline's answer and the
    case's key points."""
    correct = None if answers is None else is_correct(result.answer, list(answers))
    agreement = None if reference is None else answer_agreement(reference, result.answer)
    hit = None if key_points is None else key_point_coverage(result.answer, key_points)
    return RunRecord(result, correct, agreement, hit)


def carried_runs(record: CaseRecord | None, case: Case, keeps: list[str]) -> dict[str | None, RunResult]:
    """The runs of `case` that a resumed journal's `record` holds, by keep (None: the baseline); none
    when the record is of a failed case (it runs again) or of the case as the suite stated it before."""
    if not is_record_of(record, case) or record.baseline is None:
        return {}
    return {
        None: record.baseline.result,
        **{keep: run.result for keep, run in record.spec.items() if keep in keeps},
    }


def is_record_of(record: CaseRecord | None, case: Case) -> bool:
    """True when `record` finished `case` as the suite now states it (same question, document and answers)."""
    return (
        record is not None
        and not record.failed
        and record.question == case.question
        and record.doc == str(case.doc)
        and record.answers == case.answers
        and record.kind == case.kind
        and record.key_points == case.key_points
    )
