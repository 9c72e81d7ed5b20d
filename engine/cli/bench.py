"""`specprefill bench`: TTFT of full prefill vs SpecPrefill at several prompt lengths."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.api import load_document
from engine.api.harness import (
    BenchRow,
    ReadAheadBenchRow,
    SessionBenchRow,
    bench_report,
    bench_settings,
    fit_label,
    plot_ttft,
    prefix_context_rss_bytes,
    run_bench,
    run_read_ahead_bench,
    run_session_bench,
)
from engine.cli.loading import load_engine
from engine.cli.options import (
    add_model_options,
    add_run_options,
    doc_arg,
    int_list,
    path_arg,
    run_settings_from,
)
from engine.cli.target_shape import add_target_shape_option, apply_target_shape
from engine.core.cancel import CancelToken
from engine.core.events import RunFinished, StageChanged
from engine.core.formatting import format_bytes, format_percent


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("bench", help="TTFT of full prefill vs SpecPrefill at several prompt lengths")
    p.add_argument(
        "--doc",
        type=doc_arg,
        required=True,
        help="the document whose text is cut to each length (a PDF, a text file or a code folder)",
    )
    p.add_argument(
        "--lengths",
        type=int_list,
        default=[2048, 4096, 8192],
        help="prompt lengths in tokens, comma-separated (default 2048,4096,8192)",
    )
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("--plot", type=path_arg, help="write a PNG of TTFT vs length")
    p.add_argument(
        "--respect-threshold",
        action="store_true",
        help="bypass SpecPrefill below --min-tokens, to measure the bypass cost",
    )
    p.add_argument(
        "--sessions",
        action="store_true",
        help="measure a document session's paths instead: cold full prefill, cold SpecPrefill, "
        "follow-ups with the cached draft (alone and during a background fill), from the "
        "cached full prefix, and after reopening from the saved state; with memory",
    )
    p.add_argument(
        "--read-ahead",
        action="store_true",
        help="measure the first question after the draft's read-ahead instead: cold full prefill, "
        "cold SpecPrefill and SpecPrefill after the read-ahead, per length, in one run",
    )
    add_run_options(p, sampling=False)
    add_model_options(p)
    add_target_shape_option(p)
    p.set_defaults(command=command, max_new_tokens=16)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    apply_target_shape(args, cancel)
    if args.sessions:
        return sessions_command(args, cancel)
    if args.read_ahead:
        return read_ahead_command(args, cancel)
    settings = bench_settings(run_settings_from(args), args.respect_threshold)
    document = load_document(args.doc, password=args.password, cancel=cancel)
    engine = load_engine(args, cancel, quiet=args.json)
    if not args.json:
        print(draft_line(engine.info), flush=True)
    rows: list[BenchRow] = []
    try:
        for item in run_bench(engine, document.text, args.lengths, settings, cancel):
            if isinstance(item, BenchRow):
                rows.append(item)
                if not args.json:
                    print(bench_line(item), flush=True)
            elif isinstance(item, StageChanged) and item.stage in ("draft", "prefill") and not args.json:
                print(f"[bench] {item.run}: {item.detail}", file=sys.stderr, flush=True)
    finally:
        engine.close()
    report = bench_report(rows, args.keep, str(args.doc), engine.info)
    if args.plot:
        plot_ttft(rows, args.plot, f"{Path(args.doc).name}, keep {args.keep}, {report.models.device}")
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    return 0


def draft_line(info) -> str:
    """The draft's format and its measured forward, above the rows the draft's seconds are in."""
    forward = (
        f"; its forward {info.draft_forward_s_per_1k:.2f} s per 1K tokens"
        if info.draft_forward_s_per_1k
        else ""
    )
    return f"draft {info.draft_name}: {info.draft_precision} ({info.draft_precision_reason}){forward}"


def bench_line(r: BenchRow) -> str:
    return (
        f"{r.prompt_tokens:>6} tok | baseline {r.baseline_ttft_s:7.2f}s | spec {r.spec_ttft_s:7.2f}s "
        f"(draft {r.draft_s:6.2f}s = {r.draft_s_per_1k:5.2f}s/1K + target {r.target_prefill_s:6.2f}s + other {r.overhead_s:5.2f}s) | "
        f"{r.speedup:4.2f}x | kept {format_percent(r.kept_fraction)} | {r.positions}"
        f" | draft mem {format_bytes(r.draft_peak_mem_bytes)}{fit_marks(r)}"
    )


def fit_marks(r: BenchRow) -> str:
    """For a length longer than the window: how each run fit it ("" when the document fit)."""
    marks = [
        f"{run} {label}"
        for run, label in (
            ("baseline", fit_label(r.baseline_fit, r.baseline_seen_fraction)),
            ("spec", fit_label(r.spec_fit, r.spec_seen_fraction)),
        )
        if label
    ]
    return "".join(f" | {mark}" for mark in marks)


def sessions_command(args: argparse.Namespace, cancel: CancelToken) -> int:
    settings, document, engine = _open(args, cancel)
    try:
        prefix_context = prefix_context_rss_bytes(engine)
        if not args.json:
            print(
                f"prefix context ({engine.info.n_ctx} tokens): +{format_bytes(prefix_context)} RSS",
                flush=True,
            )
        items = run_session_bench(engine, document.text, args.lengths, settings, cancel)
        rows = _collect(items, SessionBenchRow, session_line, lambda r: r.result.served_by, args.json)
    finally:
        engine.close()
    if args.json:
        _print_json(
            args, engine, "sessions", rows, n_ctx=engine.info.n_ctx, prefix_context_rss_bytes=prefix_context
        )
    return 0


def read_ahead_command(args: argparse.Namespace, cancel: CancelToken) -> int:
    settings, document, engine = _open(args, cancel)
    try:
        items = run_read_ahead_bench(engine, document.text, args.lengths, settings, cancel)
        rows = _collect(items, ReadAheadBenchRow, read_ahead_line, _run_and_path, args.json)
    finally:
        engine.close()
    if args.json:
        _print_json(args, engine, "read_ahead", rows)
    return 0


def _run_and_path(finished: RunFinished) -> str:
    return f"{finished.run} {finished.result.served_by or 'cold'}"


def _open(args: argparse.Namespace, cancel: CancelToken):
    """The settings, the document and the loaded engine, in the order a failure is cheapest."""
    settings = bench_settings(run_settings_from(args), args.respect_threshold)
    document = load_document(args.doc, password=args.password, cancel=cancel)
    engine = load_engine(args, cancel, quiet=args.json)
    if not args.json:
        print(draft_line(engine.info), flush=True)
    return settings, document, engine


def _collect(items, row_type: type, line, run_label, quiet: bool) -> list:
    """The rows of a bench's event stream, each printed as it comes, and a stderr line per run."""
    rows = []
    for item in items:
        if isinstance(item, row_type):
            rows.append(item)
            if not quiet:
                print(line(item), flush=True)
        elif isinstance(item, RunFinished) and not quiet:
            print(f"[bench] {run_label(item)}: TTFT {item.result.ttft_s:.2f}s", file=sys.stderr, flush=True)
    return rows


def _print_json(args: argparse.Namespace, engine, key: str, rows: list, **extra) -> None:
    models = bench_report([], args.keep, str(args.doc), engine.info).to_json()["models"]
    data = {
        key: [row.to_json() for row in rows],
        "keep": args.keep,
        "doc": str(args.doc),
        **extra,
        "models": models,
    }
    print(json.dumps(data, indent=2))


def read_ahead_line(r: ReadAheadBenchRow) -> str:
    return (
        f"{r.prompt_tokens:>6} tok | cold full {r.cold_full_ttft_s:7.2f}s | cold spec {r.cold_spec_ttft_s:7.2f}s | "
        f"after read-ahead {r.read_ahead_spec_ttft_s:6.2f}s ({r.of_full:.0%} of cold full, {r.of_spec:.0%} of "
        f"cold spec; draft {r.read_ahead_draft_s:.2f}s) | read-ahead {r.read_ahead_s:.2f}s {r.read_ahead_status} "
        f"| {r.read_ahead_served_by}"
    )


def session_line(r: SessionBenchRow) -> str:
    return (
        f"{r.prompt_tokens:>6} tok | cold full {r.cold_full_ttft_s:7.2f}s | cold spec {r.cold_spec_ttft_s:7.2f}s | "
        f"spec+cached draft {r.spec_cached_draft_ttft_s:6.2f}s ({r.spec_cached_draft_ttft_s / r.cold_spec_ttft_s:.0%}"
        f" of cold spec; {r.background_slowdown:+.1%} during a background fill) | cached full "
        f"{r.cached_full_ttft_s:5.2f}s | reopened {r.saved_state_ttft_s:5.2f}s | draft cache "
        f"{format_bytes(r.draft_cache_bytes)} | state file {format_bytes(r.state_file_bytes)} | "
        f"RSS with both caches {format_bytes(r.rss_with_both_caches_bytes)}, peak {format_bytes(r.peak_rss_bytes)}"
    )
