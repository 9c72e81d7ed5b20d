"""An A/B report as typed, frozen records, and their JSON.

    report = AbReport.from_json(json.loads(path.read_text()))
    report.summary.overall.spec["0.2"].speedup, report.cases[0].baseline.result.answer

The JSON keeps the field names reports have always had (checks outside this repo read
them). Fields added since appear only when they say something: `status` and `error` on a
case that failed, `n_errors` in a summary that left failed cases out; and for a suite run
with `--reuse-cache`, `served_by` on each run, `n_cached` and the cached_mean_* timings in
its summaries, `reuse_cache` in its environment. Every run carries how its document
fit the target's window (`document_tokens`, `fit`, `seen_fraction`); a run recorded before
reads as one that fit. So a report written before them reads back, and writes out, unchanged.
A field typed as a number or a flag that holds anything else (text, say) is refused with a
ReportFieldError (engine.eval.field_checks) naming the case and the field: a report read back is
rendered again. How runs are labelled and noted is engine.eval.labels.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

from engine.core.events import RunName, RunResult, run_json
from engine.core.formatting import format_accuracy, format_percent_short
from engine.eval.field_checks import require_numbers_and_flags
from engine.eval.labels import (
    FIT_LABELS,
    cached_note,
    fit_note,
    fit_tally,
    is_cached,
    run_label,
    without_unknown_fit,
)

ERROR_STATUS = "error"  # a case record's `status` when the case failed; absent when it finished


@dataclass(frozen=True)
class RunRecord:
    """One run of one case: the engine's result, scored."""

    result: RunResult
    correct: bool | None  # None: the case has no expected answers
    agreement: float | None = None  # ROUGE-L F1 against the baseline's answer; SpecPrefill runs only
    key_points_hit: float | None = (
        None  # share of the case's key points the answer mentions; None: none listed
    )

    @property
    def is_spec(self) -> bool:
        return self.result.run == "spec"

    @property
    def cached(self) -> bool:
        return is_cached(self.result)

    @property
    def cached_note(self) -> str:
        return cached_note(self.result)

    @property
    def fit_note(self) -> str:
        return fit_note(self.result)

    def to_json(self) -> dict:
        data = {
            **without_unknown_fit(self.result.to_json(), self.result.document_tokens),
            "correct": self.correct,
        }
        if self.is_spec:
            data["agreement"] = self.agreement
        if self.key_points_hit is not None:
            data["key_points_hit"] = self.key_points_hit
        return data

    @classmethod
    def from_json(cls, data: dict, run: RunName, where: str = "run") -> RunRecord:
        require_numbers_and_flags(RunResult, data, where)
        require_numbers_and_flags(cls, data, where)
        scores = ("correct", "agreement", "key_points_hit")
        result = RunResult(run=run, **{k: v for k, v in data.items() if k not in scores})
        return cls(result, data["correct"], data.get("agreement"), data.get("key_points_hit"))


@dataclass(frozen=True)
class CaseRecord:
    """A case, its baseline run and one SpecPrefill run per keep; or why it failed."""

    id: str
    kind: str
    question: str
    answers: tuple[str, ...] | None
    doc: str
    prompt_tokens: int | None  # None when the case failed before its baseline finished
    baseline: RunRecord | None  # None when the case failed before it finished
    spec: dict[str, RunRecord]  # by keep as typed; a failed case holds the keeps that finished
    error: str | None = None  # why the case failed; None when it finished
    key_points: tuple[tuple[str, ...], ...] | None = None  # a summary case's points, each its phrases

    @property
    def failed(self) -> bool:
        return self.error is not None

    def runs(self) -> Iterator[tuple[str | None, RunRecord]]:
        """(None, the baseline), then (keep, run) for each SpecPrefill run that finished."""
        if self.baseline is not None:
            yield None, self.baseline
        yield from self.spec.items()

    def to_json(self) -> dict:
        data = {
            "id": self.id,
            "kind": self.kind,
            "question": self.question,
            "answers": None if self.answers is None else list(self.answers),
            "doc": self.doc,
            "prompt_tokens": self.prompt_tokens,
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "spec": {keep: run.to_json() for keep, run in self.spec.items()},
        }
        if self.key_points is not None:
            data["key_points"] = [list(point) for point in self.key_points]
        if self.failed:
            data.update(status=ERROR_STATUS, error=self.error)
        return data

    @classmethod
    def from_json(cls, data: dict) -> CaseRecord:
        answers, baseline, where = data["answers"], data["baseline"], f"case {data['id']!r}"
        require_numbers_and_flags(cls, data, where)
        return cls(
            id=data["id"],
            kind=data["kind"],
            question=data["question"],
            answers=None if answers is None else tuple(answers),
            doc=data["doc"],
            prompt_tokens=data["prompt_tokens"],
            baseline=None
            if baseline is None
            else RunRecord.from_json(baseline, "baseline", f"{where}, baseline"),
            spec={
                keep: RunRecord.from_json(run, "spec", f"{where}, {run_label(keep)}")
                for keep, run in data["spec"].items()
            },
            error=data.get("error"),
            key_points=None
            if data.get("key_points") is None
            else tuple(tuple(p) for p in data["key_points"]),
        )


@dataclass(frozen=True)
class RunSummary:
    """Accuracy, agreement and mean timings of the baseline, or of one keep, over a group of cases."""

    run: RunName
    accuracy: float | None  # None when no case of the group has expected answers
    n_scored: int
    agreement: float | None = None
    mean_ttft_s: float | None = None
    mean_tokenize_s: float | None = None
    mean_target_prefill_s: float | None = None
    mean_draft_s: float | None = None
    mean_select_s: float | None = None
    mean_kept_fraction: float | None = None
    speedup: float | None = None
    n_bypassed: int | None = None
    # Runs served from a document's caches (`ab --reuse-cache`), kept apart: the mean_* timings and
    # the speed-up above are over cold runs only. n_cached is None when no run was from a session.
    n_cached: int | None = None
    cached_mean_ttft_s: float | None = None
    cached_mean_tokenize_s: float | None = None
    cached_mean_target_prefill_s: float | None = None
    # 95% Wilson interval of the accuracy, and the mean share of key points summaries mention;
    # None where not measured (reports written before them read and write back as they were)
    accuracy_low: float | None = None
    accuracy_high: float | None = None
    key_point_coverage: float | None = None
    n_key_point_cases: int | None = None

    SPEC_ONLY = ("agreement", "mean_draft_s", "mean_select_s", "mean_kept_fraction", "speedup", "n_bypassed")
    SESSION_ONLY = (
        "n_cached",
        "cached_mean_ttft_s",
        "cached_mean_tokenize_s",
        "cached_mean_target_prefill_s",
    )
    OPTIONAL = ("accuracy_low", "accuracy_high", "key_point_coverage", "n_key_point_cases")

    def to_json(self) -> dict:
        data = run_json(self, self.SPEC_ONLY)
        if self.n_cached is None:  # one-shot runs: the summary's JSON stays as it has always been
            for name in self.SESSION_ONLY:
                del data[name]
        for name in self.OPTIONAL:
            if data.get(name, 0) is None:
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: dict, run: RunName, where: str = "summary") -> RunSummary:
        require_numbers_and_flags(cls, data, where)
        return cls(run=run, **data)


def accuracy_text(s: RunSummary) -> str:
    """ "90.0% (9/10) [60–98%]": the accuracy, what it counts, its 95% interval; and, where summaries
    list key points, " · key points 72%"."""
    text = format_accuracy(s.accuracy, s.n_scored)
    if s.accuracy is not None and s.accuracy_low is not None and s.accuracy_high is not None:
        text += f" [{format_percent_short(s.accuracy_low)}–{format_percent_short(s.accuracy_high)}]"
    if s.key_point_coverage is not None:
        points = f"key points {format_percent_short(s.key_point_coverage)}"
        text = points if s.accuracy is None else f"{text} · {points}"
    return text


@dataclass(frozen=True)
class GroupSummary:
    """The figures of a group of cases (the whole suite, or one kind). Failed cases are counted, not averaged."""

    n_cases: int
    baseline: RunSummary
    spec: dict[str, RunSummary]  # by keep
    n_errors: int = 0

    def runs(self) -> Iterator[tuple[str | None, RunSummary]]:
        yield None, self.baseline
        yield from self.spec.items()

    def to_json(self) -> dict:
        data = {
            "n_cases": self.n_cases,
            "baseline": self.baseline.to_json(),
            "spec": {keep: s.to_json() for keep, s in self.spec.items()},
        }
        if self.n_errors:
            data["n_errors"] = self.n_errors
        return data

    @classmethod
    def from_json(cls, data: dict, where: str = "summary") -> GroupSummary:
        require_numbers_and_flags(cls, data, where)
        return cls(
            n_cases=data["n_cases"],
            baseline=RunSummary.from_json(data["baseline"], "baseline", f"{where}, baseline"),
            spec={
                keep: RunSummary.from_json(s, "spec", f"{where}, {run_label(keep)}")
                for keep, s in data["spec"].items()
            },
            n_errors=data.get("n_errors", 0),
        )


@dataclass(frozen=True)
class Summary:
    keeps: tuple[str, ...]  # as typed
    overall: GroupSummary
    by_kind: dict[str, GroupSummary]

    def to_json(self) -> dict:
        overall = self.overall.to_json()
        return {
            "n_cases": overall.pop("n_cases"),
            "keeps": list(self.keeps),
            **overall,
            "by_kind": {kind: group.to_json() for kind, group in self.by_kind.items()},
        }

    @classmethod
    def from_json(cls, data: dict) -> Summary:
        return cls(
            keeps=tuple(data["keeps"]),
            overall=GroupSummary.from_json(data),
            by_kind={
                kind: GroupSummary.from_json(group, f"summary of kind {kind!r}")
                for kind, group in data["by_kind"].items()
            },
        )


@dataclass(frozen=True)
class ModelEntry:
    name: str
    path: str
    default: bool  # one of the default models, whose hash Engine.load verified
    sha256: str | None  # the default's hash; None for a custom file (not re-hashed)


@dataclass(frozen=True)
class Versions:
    python: str
    torch: str | None
    llama_cpp_python: str | None
    specprefill: str | None
    cpu_path: str | None = None  # llama.cpp's CPU variant and extra buffers; None: not recorded


@dataclass(frozen=True)
class Environment:
    """What produced the numbers: models, runtime, settings."""

    target: ModelEntry
    draft: ModelEntry
    device: str
    n_ctx: int
    restore_supported: bool
    positions_requested: str
    positions_used: str | None  # None when every SpecPrefill run was bypassed
    threads: int | None
    versions: Versions
    platform: str
    date: str  # ISO 8601, UTC
    settings: dict = field(
        default_factory=dict
    )  # RunSettings but keep, as recorded: older reports have fewer
    reuse_cache: bool = False  # `ab --reuse-cache`: each document's caches served its follow-up questions

    def to_json(self) -> dict:
        data = asdict(self)
        if not self.reuse_cache:
            del data["reuse_cache"]  # cold one-shot suites write the environment they always have
        if self.versions.cpu_path is None:
            del data["versions"]["cpu_path"]  # a report from before it was recorded writes back as it was
        return data

    @classmethod
    def from_json(cls, data: dict) -> Environment:
        require_numbers_and_flags(cls, data, "environment")
        for model in ("target", "draft"):
            require_numbers_and_flags(ModelEntry, data[model], f"environment, {model}")
        return cls(
            **{
                **data,
                "target": ModelEntry(**data["target"]),
                "draft": ModelEntry(**data["draft"]),
                "versions": Versions(**data["versions"]),
            }
        )


@dataclass(frozen=True)
class AbReport:
    summary: Summary
    cases: tuple[CaseRecord, ...]
    environment: Environment

    @property
    def failed_cases(self) -> list[CaseRecord]:
        return [case for case in self.cases if case.failed]

    @property
    def has_unfit_runs(self) -> bool:
        """True when some run's document did not fit the target's window (cut, or fit by selection)."""
        return any(run.result.fit in FIT_LABELS for case in self.cases for _, run in case.runs())

    def fit_tallies(self) -> dict[str, str]:
        """By run label ("baseline", "keep 0.2"), how its runs of the finished cases fit the window;
        only the runs some of whose documents did not fit."""
        finished = [case for case in self.cases if not case.failed]  # the cases the figures are over
        by_label: dict[str, list[RunResult]] = {}
        for case in finished:
            for keep, run in case.runs():
                by_label.setdefault(run_label(keep), []).append(run.result)
        tallies = {label: fit_tally(results) for label, results in by_label.items()}
        return {label: tally for label, tally in tallies.items() if tally}

    def to_json(self) -> dict:
        return {
            "summary": self.summary.to_json(),
            "cases": [case.to_json() for case in self.cases],
            "environment": self.environment.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict) -> AbReport:
        return cls(
            summary=Summary.from_json(data["summary"]),
            cases=tuple(CaseRecord.from_json(case) for case in data["cases"]),
            environment=Environment.from_json(data["environment"]),
        )
