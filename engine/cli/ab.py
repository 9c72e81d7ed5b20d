"""`specprefill ab`: run an A/B suite (baseline vs SpecPrefill at several keep values).

    specprefill ab --suite FILE.jsonl [--keep 0.1,0.2,0.3] [--positions auto] [--json]
                   [--report OUT.html] [--csv OUT.csv] [--resume] [--reuse-cache]

Stdout is one JSON object with --json, a summary table otherwise; progress goes to stderr.
The models load once for the whole suite. Every output folder is tried for writing before
they load. Each case is written to a journal as it finishes (beside the report, else in
the cache), so --resume continues an interrupted suite; a case that fails is reported as
such and the suite goes on. Report files are written atomically, so an interrupted run
leaves the previous report intact.

By default every run is cold (a one-shot prefill). --reuse-cache asks each document's
questions in one session (engine.pipeline.session): its follow-up baselines come from the
cached prefix, so accuracy over many questions per document is measured many times faster.
Those runs' TTFTs are labelled "cached" and kept out of the mean TTFTs and speed-ups, which
stay over cold runs only.

A document longer than the target's window is cut to fit for the baseline and fit by selection
for SpecPrefill; each such run is labelled ("truncated: saw 52% of the document") in the
progress, the table, the CSV and the HTML report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from engine.api import (
    DEFAULT_KEEPS,
    AbCaseDone,
    AbError,
    AbFinished,
    AbProgress,
    AbReport,
    AbRunDone,
    Case,
    CaseRecord,
    GroupSummary,
    RunSummary,
    load_suite,
    parse_keeps,
    run_label,
    run_notes,
    run_suite,
    write_csv,
)
from engine.api.harness import (
    AbEvent,
    JournalHeader,
    accuracy_text,
    append_case,
    claim_journal,
    default_journal_path,
    keep_setting,
    read_journal,
    settings_record,
    start_journal,
    write_html,
)
from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, add_run_options, comma_items, path_arg, run_settings_from
from engine.core.cancel import CancelToken
from engine.core.formatting import (
    MISSING,
    format_count,
    format_duration,
    format_percent,
    format_ratio,
    format_seconds,
)
from engine.core.private import private_dir
from engine.core.settings import RunSettings

JOURNAL_HELP = (
    "Each case is written, as it finishes, to a journal: OUT.journal.jsonl beside --report "
    "(else --csv), or without either in the cache folder's ab-journals/."
)


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "ab", help="A/B suite: baseline vs SpecPrefill at several keep values", epilog=JOURNAL_HELP
    )
    p.add_argument("--suite", type=path_arg, required=True, help="JSONL file, one case per line")
    p.add_argument(
        "--keep",
        default=DEFAULT_KEEPS,
        help=f"comma-separated fractions of chunks to keep, each in (0, 1], or auto (chosen per question "
        f"from the draft's scores) (default {DEFAULT_KEEPS})",
    )
    p.add_argument(
        "--only",
        metavar="KIND[,KIND]",
        default=None,
        help="run only the cases of these kinds (a full suite takes hours on a CPU: run it in parts)",
    )
    p.add_argument(
        "--cases",
        metavar="ID[,ID]",
        default=None,
        help="run only the cases with these ids (after --only): re-measure a few after a change",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object {summary, cases, environment}")
    p.add_argument("--report", type=path_arg, metavar="OUT.html", help="write a self-contained HTML report")
    p.add_argument("--csv", type=path_arg, metavar="OUT.csv", help="write one CSV row per case and run")
    p.add_argument(
        "--resume",
        action="store_true",
        help="skip the cases the journal already holds (a failed case runs again); keeps may be "
        "added, and its cases then run only those; refused when the journal was made with another "
        "suite, a keep not asked for or other settings. " + JOURNAL_HELP,
    )
    p.add_argument(
        "--reuse-cache",
        action="store_true",
        help="reuse each document's caches across its questions: faster accuracy; cached TTFTs are "
        "labelled and kept out of the cold means (mean TTFT, speed-up)",
    )
    add_run_options(p, skip=("keep",), sampling=False)
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def command(args, cancel: CancelToken) -> int:
    # Everything that can be checked without the models is checked before loading them.
    keeps = parse_keeps(args.keep)
    cases = only_ids(only_kinds(load_suite(args.suite), args.only), args.cases)
    settings = run_settings_from(args, keep=keep_setting(keeps[0]))  # each SpecPrefill run sets its own keep
    for out in (args.report, args.csv):
        if out is not None:
            require_writable_folder(out)
    journal = default_journal_path(args.suite, args.report or args.csv)
    header = JournalHeader.of(args.suite, keeps, settings_record(settings), args.reuse_cache)
    _make_journal_folder(journal)
    with claim_journal(journal):  # from the resume's read to the last case: no other run writes it meanwhile
        finished = _prepare_journal(journal, header, args.resume, {case.id for case in cases})
        engine = load_engine(args, cancel, quiet=args.json)
        try:
            start_journal(
                journal, header, finished.values()
            )  # only now: a failed load leaves the old journal alone
            report = _run_journaled(
                engine, cases, keeps, settings, cancel, journal, finished, args.password, args.reuse_cache
            )
        finally:
            engine.close()
    _write_files(report, args.report, args.csv)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(format_summary(report))
    return 0


def only_kinds(cases: list[Case], only: str | None) -> list[Case]:
    """The cases of the listed kinds (all without a list); a kind the suite lacks is refused, naming those it has."""
    return only_listed(
        cases,
        only,
        "kind",
        lambda kind, kinds: f"no case of kind {kind!r} in the suite (its kinds: {', '.join(kinds)})",
    )


def only_ids(cases: list[Case], ids: str | None) -> list[Case]:
    """The cases with the listed ids, in suite order (all without a list); an id not among `cases` is refused."""
    return only_listed(
        cases,
        ids,
        "id",
        lambda case_id, _: f"no case with id {case_id!r} among the cases to run (see --only)",
    )


def only_listed(
    cases: list[Case], listed: str | None, field: str, refusal: Callable[[str, list[str]], str]
) -> list[Case]:
    """The cases whose `field` is in the comma-separated `listed`, in suite order (all when it is None).
    An empty list, or a value no case has, is refused: refusal(the first such value, the values present)."""
    if listed is None:
        return cases
    wanted = comma_items(listed)
    present = sorted({getattr(case, field) for case in cases})
    missing = [value for value in wanted if value not in present]
    if not wanted or missing:
        raise AbError(refusal((missing or [listed])[0], present))
    return [case for case in cases if getattr(case, field) in wanted]


def require_writable_folder(path: Path) -> None:
    """Fail before an hour of runs, not after: create and delete a file where `path` will be written."""
    if path.is_dir():
        raise AbError(f"cannot write {path}: it is a folder")
    if not path.parent.is_dir():
        raise AbError(f"cannot write {path}: folder {path.parent} does not exist")
    try:
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=".specprefill-write-test-")
    except OSError as e:
        raise AbError(f"cannot write {path}: {e.strerror or e}") from None
    os.close(fd)
    os.unlink(probe)


def _make_journal_folder(path: Path) -> None:
    """Check the journal can be written; the cache's journal folder is made the first time (the
    user's alone, as the rest of the cache)."""
    try:
        private_dir(path.parent)
    except OSError as e:
        raise AbError(f"cannot create {path.parent}: {e.strerror or e}") from None
    require_writable_folder(path)


def _prepare_journal(
    path: Path, header: JournalHeader, resume: bool, chosen: set[str]
) -> dict[str, CaseRecord]:
    """When resuming, read the finished cases to skip. `chosen`: the ids this run asks for (--only,
    --cases), the only ones an added keep runs on."""
    if not resume:
        _say(f"[ab] finished cases go to {path} as they complete (--resume continues from there)")
        return {}
    if not path.exists():
        _say(f"[ab] nothing to resume: no journal at {path}; starting from the first case")
        return {}
    finished = read_journal(path, header)
    asked = [record for record in finished.values() if record.id in chosen]
    added = [keep for keep in header.keeps if any(keep not in record.spec for record in asked)]
    if not added:
        _say(f"[ab] resuming from {path}: {format_count(len(finished), 'finished case')} will not run again")
        return finished
    lacking = sum(1 for record in asked if not set(added) <= record.spec.keys())
    _say(
        f"[ab] resuming from {path}: {format_count(len(finished), 'finished case')}, {lacking:,} of which will run "
        f"only the keeps the journal lacks ({', '.join(added)}), beside their runs in it"
    )
    return finished


def _run_journaled(
    engine,
    cases: list[Case],
    keeps: list[str],
    settings: RunSettings,
    cancel: CancelToken,
    journal: Path,
    finished: dict[str, CaseRecord],
    password: str | None,
    reuse_cache: bool = False,
) -> AbReport:
    for event in run_suite(
        engine, cases, keeps, settings, cancel, password=password, finished=finished, reuse_cache=reuse_cache
    ):
        if isinstance(event, AbFinished):
            return event.report
        if isinstance(event, AbCaseDone):
            append_case(journal, event.record)
        print_progress(event)
    raise AbError("the suite ended without a report")  # unreachable: run_suite always finishes with one


def print_progress(event: AbEvent) -> None:
    if isinstance(event, AbProgress):
        _say(progress_line(event))
    elif isinstance(event, AbRunDone):
        notes = run_notes(event.result)
        suffix = f" ({', '.join(notes)})" if notes else ""
        _say(f"[ab]   {event.label}: TTFT {format_seconds(event.result.ttft_s)}{suffix}")
    elif isinstance(event, AbCaseDone) and event.failure:
        _say(f"[ab] failed, the suite goes on: {event.failure}")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _write_files(report: AbReport, html_path: Path | None, csv_path: Path | None) -> None:
    if html_path is not None:
        write_html(report, html_path)
        _say(f"[ab] wrote {html_path}")
    if csv_path is not None:
        write_csv(report, csv_path)
        _say(f"[ab] wrote {csv_path}")


# -- text output ---------------------------------------------------------------------
def progress_line(p: AbProgress) -> str:
    eta = "ETA --" if p.eta_s is None else f"ETA {format_duration(p.eta_s)}"
    return (
        f"[ab] case {p.case_number}/{p.n_cases} {p.case_id}: {p.label} "
        f"(run {p.runs_done + 1}/{p.runs_total}, elapsed {format_duration(p.elapsed_s)}, {eta})"
    )


TABLE_HEAD = ("run", "accuracy", "agreement", "mean TTFT", "speed-up", "kept", "bypassed")
CACHED_HEAD = ("cached runs", "cached mean TTFT")  # only for suites run with --reuse-cache
CACHED_NOTE = (
    "document caches reused (--reuse-cache): mean TTFT and speed-up are over cold runs only; "
    "cached runs are counted and averaged apart"
)
FIT_NOTE = "documents longer than the context window (the baseline saw them cut, SpecPrefill by selection):"


def format_summary(report: AbReport) -> str:
    """The overall table, then accuracy (or agreement) per kind, then the cases that failed."""
    summary = report.summary
    with_cached = report.environment.reuse_cache
    head = (*TABLE_HEAD, *CACHED_HEAD) if with_cached else TABLE_HEAD
    rows = [_summary_cells(run_label(keep), s, with_cached) for keep, s in summary.overall.runs()]
    lines = [format_count(summary.overall.n_cases, "case"), *_align([head, *rows])]
    if with_cached:
        lines.append(CACHED_NOTE)
    lines += _fit_lines(report.fit_tallies())
    lines += ["", "by kind (accuracy; agreement for kinds without answers):"]
    lines += _align(
        [
            ("kind", "cases", *(run_label(keep) for keep in [None, *summary.keeps])),
            *(_kind_cells(kind, group) for kind, group in sorted(summary.by_kind.items())),
        ]
    )
    if report.failed_cases:
        lines += ["", f"failed, left out of the figures above ({len(report.failed_cases)}):"]
        lines += [f"  {case.id}: {case.error}" for case in report.failed_cases]
    return "\n".join(lines)


def _fit_lines(tallies: dict[str, str]) -> list[str]:
    """Under the table: the runs whose document was longer than the window, so no figure hides a cut."""
    if not tallies:
        return []
    return [FIT_NOTE, *(f"  {label}: {tally}" for label, tally in tallies.items())]


def _summary_cells(label: str, s: RunSummary, with_cached: bool = False) -> tuple[str, ...]:
    cells = (
        label,
        accuracy_text(s),
        format_percent(s.agreement),
        format_seconds(s.mean_ttft_s),
        format_ratio(s.speedup),
        format_percent(s.mean_kept_fraction),
        _count(s.n_bypassed),
    )
    return (*cells, _count(s.n_cached), format_seconds(s.cached_mean_ttft_s)) if with_cached else cells


def _count(n: int | None) -> str:
    return MISSING if n is None else str(n)


def _kind_cells(kind: str, group: GroupSummary) -> tuple[str, ...]:
    def quality(s: RunSummary) -> str:
        if s.accuracy is not None or s.key_point_coverage is not None:
            return accuracy_text(s)
        return MISSING if s.agreement is None else f"agr {format_percent(s.agreement)}"

    return (kind, str(group.n_cases), *(quality(s) for _, s in group.runs()))


def _align(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
