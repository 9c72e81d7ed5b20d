"""A/B evaluation: each suite case runs the baseline once, then SpecPrefill at each keep value.

    for event in run_suite(engine, cases, ["0.1", "0.2"], settings, cancel):
        ...  # AbProgress before each run, AbRunDone after it, AbFinished(report) last

Keep values stay the strings the user typed: they are the keys of the report. The report
is plain JSON-ready data (summary, cases, environment), so report.py and the GUI can read
a saved one as easily as a fresh one.
"""

from __future__ import annotations

import math
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from engine.models import defaults as models
from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import SpecPrefillError
from engine.core.events import RunFinished, RunResult
from engine.ingest import Document, load_document
from engine.eval.metrics import answer_agreement, is_correct
from engine.core.settings import RunSettings
from engine.eval.suite import Case

if TYPE_CHECKING:
    from engine.pipeline import Engine

BASELINE = "baseline"
DEFAULT_KEEPS = "0.1,0.2,0.3"


class AbError(SpecPrefillError):
    """A bad keep list, or a case that could not run (its id and line are in the message)."""


# -- events --------------------------------------------------------------------
@dataclass(frozen=True)
class AbProgress:
    """Sent before each run: which case and run comes next, and how far along the suite is."""

    case_number: int  # 1-based
    n_cases: int
    case_id: str
    label: str  # "baseline" or "keep 0.2"
    runs_done: int
    runs_total: int
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
class AbReport:
    summary: dict
    cases: list[dict]
    environment: dict

    def to_json(self) -> dict:
        return {"summary": self.summary, "cases": self.cases, "environment": self.environment}


@dataclass(frozen=True)
class AbFinished:
    report: AbReport


AbEvent = AbProgress | AbRunDone | AbFinished


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
    try:
        value = float(keep)
    except ValueError:
        raise AbError(f"keep must be a number in (0, 1], got {keep!r}") from None
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise AbError(f"keep must be in (0, 1], got {keep}")


def run_label(keep: str | None) -> str:
    return BASELINE if keep is None else f"keep {keep}"


# -- running -----------------------------------------------------------------------
def run_suite(engine: Engine, cases: list[Case], keeps: list[str], settings: RunSettings,
              cancel: CancelToken = NEVER, *, password: str | None = None,
              clock: Callable[[], float] = time.monotonic) -> Iterator[AbEvent]:
    """Run every case (baseline, then each keep) and finish with the report.

    `settings` applies to every run except its `keep`, which each SpecPrefill run replaces:
    the caller decides force/min_tokens, and bypassed runs are recorded as such.
    """
    validate_keeps(keeps)
    documents: dict[Path, Document] = {}
    tracker = _ProgressTracker(len(cases), len(cases) * (1 + len(keeps)), clock)
    records: list[dict] = []
    spec_results: list[RunResult] = []
    for number, case in enumerate(cases, start=1):
        document = _cached_document(documents, case, password, cancel)
        results: dict = {}
        for keep in [None, *keeps]:
            yield tracker.before_run(number, case.id, run_label(keep))
            results[keep] = _run_case(engine, document, case, keep, settings, cancel)
            tracker.run_finished()
            yield AbRunDone(case.id, run_label(keep), results[keep])
        baseline = results.pop(None)
        spec_results.extend(results.values())
        records.append(case_record(case, baseline, results))
    yield AbFinished(AbReport(summary=summarize(records, keeps), cases=records,
                              environment=describe_environment(engine, settings, spec_results)))


def run_suite_report(engine: Engine, cases: list[Case], keeps: list[str], settings: RunSettings,
                     cancel: CancelToken = NEVER, on_progress: Callable[[AbProgress | AbRunDone], None] | None = None,
                     *, password: str | None = None) -> AbReport:
    """run_suite for callers that only want the report; `on_progress` sees every event before it."""
    for event in run_suite(engine, cases, keeps, settings, cancel, password=password):
        if isinstance(event, AbFinished):
            return event.report
        if on_progress:
            on_progress(event)
    raise AbError("the suite ended without a report")  # unreachable: run_suite always finishes with one


class _ProgressTracker:
    """Counts finished runs and turns elapsed time into an ETA."""

    def __init__(self, n_cases: int, runs_total: int, clock: Callable[[], float]):
        self.n_cases, self.runs_total, self.clock = n_cases, runs_total, clock
        self.started = clock()
        self.runs_done = 0

    def before_run(self, case_number: int, case_id: str, label: str) -> AbProgress:
        elapsed = self.clock() - self.started
        return AbProgress(case_number, self.n_cases, case_id, label, self.runs_done, self.runs_total, elapsed,
                          estimate_remaining(elapsed, self.runs_done, self.runs_total))

    def run_finished(self) -> None:
        self.runs_done += 1


def estimate_remaining(elapsed_s: float, runs_done: int, runs_total: int) -> float | None:
    """Seconds left at the mean time per finished run; None before the first finishes."""
    if runs_done == 0:
        return None
    return elapsed_s / runs_done * (runs_total - runs_done)


def _cached_document(documents: dict[Path, Document], case: Case, password: str | None,
                     cancel: CancelToken) -> Document:
    if case.doc not in documents:
        try:
            documents[case.doc] = load_document(case.doc, password=password, cancel=cancel)
        except SpecPrefillError as e:
            raise _case_error(case, e) from e
    return documents[case.doc]


def _run_case(engine: Engine, document: Document, case: Case, keep: str | None, settings: RunSettings,
              cancel: CancelToken) -> RunResult:
    mode = "baseline" if keep is None else "spec"
    run_settings = settings if keep is None else replace(settings, keep=float(keep))
    try:
        for event in engine.stream(document, case.question, mode, run_settings, cancel):
            if isinstance(event, RunFinished):
                return event.result
    except SpecPrefillError as e:
        raise _case_error(case, e) from e
    raise AbError(f"case {case.id!r}: the engine finished the {run_label(keep)} run without a result")


def _case_error(case: Case, error: SpecPrefillError) -> AbError:
    return AbError(f"case {case.id!r} (suite line {case.line}): {error}")


# -- per-case records ---------------------------------------------------------------
def case_record(case: Case, baseline: RunResult, spec: dict[str, RunResult]) -> dict:
    answers = list(case.answers) if case.answers is not None else None
    return {
        "id": case.id, "kind": case.kind, "question": case.question, "answers": answers,
        "doc": str(case.doc), "prompt_tokens": baseline.prompt_tokens,
        "baseline": run_record(baseline, case.answers),
        "spec": {keep: run_record(result, case.answers, reference=baseline.answer)
                 for keep, result in spec.items()},
    }


def run_record(result: RunResult, answers: Iterable[str] | None, reference: str | None = None) -> dict:
    """A run's timings and answer, scored against the expected answers and the baseline's answer."""
    record = result.to_json()
    record["correct"] = None if answers is None else is_correct(result.answer, list(answers))
    if reference is not None:
        record["agreement"] = answer_agreement(reference, result.answer)
    return record


# -- summary -------------------------------------------------------------------------
TIMINGS = ("ttft_s", "tokenize_s", "target_prefill_s")
SPEC_TIMINGS = (*TIMINGS, "draft_s", "select_s")


def summarize(records: list[dict], keeps: list[str]) -> dict:
    """Accuracy, agreement and mean timings, overall and per kind. Works on saved reports too."""
    return {
        "n_cases": len(records),
        "keeps": list(keeps),
        **_overall(records, keeps),
        "by_kind": {kind: {"n_cases": len(group), **_overall(group, keeps)}
                    for kind, group in _group_by_kind(records).items()},
    }


def _overall(records: list[dict], keeps: list[str]) -> dict:
    baseline = _baseline_summary(records)
    return {"baseline": baseline,
            "spec": {keep: _spec_summary(records, keep, baseline["mean_ttft_s"]) for keep in keeps}}


def _baseline_summary(records: list[dict]) -> dict:
    runs = [r["baseline"] for r in records]
    return {**_accuracy(runs), **_mean_timings(runs, TIMINGS)}


def _spec_summary(records: list[dict], keep: str, baseline_ttft: float | None) -> dict:
    runs = [r["spec"][keep] for r in records]
    mean_ttft = mean([r["ttft_s"] for r in runs])
    return {
        **_accuracy(runs),
        "agreement": mean([r["agreement"] for r in runs]),
        **_mean_timings(runs, SPEC_TIMINGS),
        "mean_kept_fraction": mean([r["kept_fraction"] for r in runs]),
        "speedup": baseline_ttft / mean_ttft if baseline_ttft is not None and mean_ttft else None,
        "n_bypassed": sum(1 for r in runs if r["bypassed"]),
    }


def _accuracy(runs: list[dict]) -> dict:
    """Share of correct answers among runs whose case has expected answers; None when none has."""
    scored = [r["correct"] for r in runs if r["correct"] is not None]
    return {"accuracy": mean([1.0 if c else 0.0 for c in scored]), "n_scored": len(scored)}


def _mean_timings(runs: list[dict], names: tuple[str, ...]) -> dict:
    return {f"mean_{name}": mean([r[name] for r in runs]) for name in names}


def _group_by_kind(records: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(record["kind"], []).append(record)
    return groups


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


# -- environment -------------------------------------------------------------------------
def describe_environment(engine: Engine, settings: RunSettings, spec_results: list[RunResult]) -> dict:
    """What produced these numbers: models (with hashes when they are the defaults), runtime, settings."""
    info = engine.info
    return {
        "target": _model_entry(info.target_name, info.target_path, models.TARGET),
        "draft": _model_entry(info.draft_name, info.draft_path, models.DRAFT),
        "device": info.device,
        "n_ctx": info.n_ctx,
        "restore_supported": info.positions_supported,
        "positions_requested": settings.positions,
        "positions_used": _positions_used(spec_results),
        "threads": _threads(info),
        "versions": _versions(),
        "platform": platform.platform(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": {k: v for k, v in asdict(settings).items() if k != "keep"},
    }


def _model_entry(name: str, path: Path, default: models.ModelSpec) -> dict:
    # Engine.load verifies a default model's hash before use; a custom file is not re-hashed here.
    is_default = Path(path) == default.path
    return {"name": name, "path": str(path), "default": is_default,
            "sha256": default.sha256 if is_default else None}


def _positions_used(spec_results: list[RunResult]) -> str | None:
    """The mode the SpecPrefill runs placed tokens with; None when every run was bypassed."""
    modes = sorted({r.positions for r in spec_results if not r.bypassed})
    return "+".join(modes) if modes else None


def _threads(info) -> int | None:
    explicit = getattr(info, "n_threads", None)
    if explicit:
        return explicit
    # Engine.load sets torch's thread count to the one it gives llama.cpp; read it only if torch is loaded.
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def _versions() -> dict:
    return {"python": platform.python_version(), "torch": _package_version("torch"),
            "llama_cpp_python": _package_version("llama-cpp-python"),
            "specprefill": _package_version("specprefill")}


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
