"""`specprefill ab`: run an A/B suite (baseline vs SpecPrefill at several keep values).

    specprefill ab --suite FILE.jsonl [--keep 0.1,0.2,0.3] [--positions auto] [--json]
                   [--report OUT.html] [--csv OUT.csv]

Stdout is one JSON object with --json, a summary table otherwise; progress goes to stderr.
The models load once for the whole suite. Report files are written atomically, so an
interrupted run leaves the previous report intact.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, add_run_options, path_arg, run_settings_from
from engine.core.cancel import CancelToken
from engine.core.formatting import format_duration
from engine.eval.ab import DEFAULT_KEEPS, AbError, AbProgress, AbRunDone, parse_keeps, run_suite_report
from engine.eval.report import MISSING, count, fmt_fraction, fmt_ratio, fmt_seconds, write_csv, write_html
from engine.eval.suite import load_suite


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("ab", help="A/B suite: baseline vs SpecPrefill at several keep values")
    p.add_argument("--suite", type=path_arg, required=True, help="JSONL file, one case per line")
    p.add_argument("--keep", default=DEFAULT_KEEPS,
                   help=f"comma-separated fractions of chunks to keep, each in (0, 1] (default {DEFAULT_KEEPS})")
    p.add_argument("--json", action="store_true", help="print one JSON object {summary, cases, environment}")
    p.add_argument("--report", type=path_arg, metavar="OUT.html", help="write a self-contained HTML report")
    p.add_argument("--csv", type=path_arg, metavar="OUT.csv", help="write one CSV row per case and run")
    add_run_options(p, skip=("keep",))
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def command(args, cancel: CancelToken) -> int:
    # Everything that can be checked without the models is checked before loading them.
    keeps = parse_keeps(args.keep)
    cases = load_suite(args.suite)
    for out in (args.report, args.csv):
        if out is not None:
            require_writable_folder(out)
    settings = run_settings_from(args, keep=float(keeps[0]))  # each SpecPrefill run sets its own keep

    engine = load_engine(args, cancel, quiet=args.json)
    try:
        report = run_suite_report(engine, cases, keeps, settings, cancel, print_progress,
                                  password=args.password).to_json()
    finally:
        engine.close()
    _write_files(report, args.report, args.csv)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_summary(report["summary"]))
    return 0


def require_writable_folder(path: Path) -> None:
    """Fail before an hour of runs, not after, when an output file cannot be created."""
    if path.is_dir():
        raise AbError(f"cannot write {path}: it is a folder")
    if not path.parent.is_dir():
        raise AbError(f"cannot write {path}: folder {path.parent} does not exist")


def print_progress(event: AbProgress | AbRunDone) -> None:
    if isinstance(event, AbProgress):
        line = progress_line(event)
    else:
        bypassed = " (bypassed)" if event.result.bypassed else ""
        line = f"[ab]   {event.label}: TTFT {event.result.ttft_s:.2f} s{bypassed}"
    print(line, file=sys.stderr, flush=True)


def _write_files(report: dict, html_path: Path | None, csv_path: Path | None) -> None:
    if html_path is not None:
        write_html(report, html_path)
        print(f"[ab] wrote {html_path}", file=sys.stderr)
    if csv_path is not None:
        write_csv(report, csv_path)
        print(f"[ab] wrote {csv_path}", file=sys.stderr)


# -- text output ---------------------------------------------------------------------
def progress_line(p: AbProgress) -> str:
    eta = "ETA --" if p.eta_s is None else f"ETA {format_duration(p.eta_s)}"
    return (f"[ab] case {p.case_number}/{p.n_cases} {p.case_id}: {p.label} "
            f"(run {p.runs_done + 1}/{p.runs_total}, elapsed {format_duration(p.elapsed_s)}, {eta})")


TABLE_HEAD = ("run", "accuracy", "agreement", "mean TTFT", "speed-up", "kept", "bypassed")


def format_summary(summary: dict) -> str:
    """The overall table, then accuracy (or agreement) per kind."""
    rows = [_summary_cells("baseline", summary["baseline"])]
    rows += [_summary_cells(f"keep {keep}", s) for keep, s in summary["spec"].items()]
    lines = [count(summary["n_cases"], "case"), *_align([TABLE_HEAD, *rows])]
    lines += ["", "by kind (accuracy; agreement for kinds without answers):"]
    lines += _align([("kind", "cases", "baseline", *(f"keep {k}" for k in summary["keeps"])),
                     *(_kind_cells(kind, k) for kind, k in sorted(summary["by_kind"].items()))])
    return "\n".join(lines)


def _summary_cells(label: str, s: dict) -> tuple[str, ...]:
    return (label, _accuracy_text(s), fmt_fraction(s.get("agreement")), fmt_seconds(s.get("mean_ttft_s")),
            fmt_ratio(s.get("speedup")), fmt_fraction(s.get("mean_kept_fraction")),
            str(s["n_bypassed"]) if "n_bypassed" in s else MISSING)


def _accuracy_text(s: dict) -> str:
    if s.get("accuracy") is None:
        return MISSING
    n = s["n_scored"]
    return f"{s['accuracy']:.1%} ({round(s['accuracy'] * n)}/{n})"


def _kind_cells(kind: str, k: dict) -> tuple[str, ...]:
    def quality(s: dict) -> str:
        if s.get("accuracy") is not None:
            return fmt_fraction(s["accuracy"])
        return MISSING if s.get("agreement") is None else f"agr {fmt_fraction(s['agreement'])}"

    return (kind, str(k["n_cases"]), quality(k["baseline"]), *(quality(s) for s in k["spec"].values()))


def _align(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
