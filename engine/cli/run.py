"""`specprefill run`: answer a question about a document, with and/or without SpecPrefill."""

from __future__ import annotations

import argparse
import json
import sys

from engine.api import load_document, selection_note
from engine.api.harness import fit_label, seen_text
from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, add_run_options, doc_arg, run_settings_from
from engine.core.cancel import CancelToken
from engine.core.events import Notice, RunFinished, RunResult, StageChanged, TokenGenerated
from engine.core.settings import RUN_MODES


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "run", help="answer a question about a document, with and/or without SpecPrefill"
    )
    p.add_argument("--doc", type=doc_arg, required=True, help="a PDF, a text file or a code folder")
    p.add_argument("--question", required=True, help="the question to answer about the document")
    p.add_argument(
        "--mode",
        choices=RUN_MODES,
        default="both",
        help="baseline: full prefill; spec: SpecPrefill; both: one after the other, compared (default)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_run_options(p)
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    settings = run_settings_from(args)  # checked before the document or the models load
    document = load_document(args.doc, password=args.password, cancel=cancel)
    if not args.json:
        for warning in document.warnings:
            print(f"specprefill: warning: {warning}", file=sys.stderr)
    engine = load_engine(args, cancel, quiet=args.json)
    try:
        results = print_events(engine.stream(document, args.question, args.mode, settings, cancel), args.json)
    finally:
        engine.close()
    report = {
        "prompt_tokens": whole_prompt_tokens(results),
        "runs": {name: r.to_json() for name, r in results.items()},
        "document": {
            "path": str(args.doc),
            "kind": document.kind,
            "chars": document.n_chars,
            "segments": len(document.segments),
            "warnings": document.warnings,
        },
        "models": {
            "target": engine.info.target_name,
            "draft": engine.info.draft_name,
            "device": engine.info.device,
            "target_device": engine.info.target_device,
            "flash_attn": engine.info.flash_attn,
            "restore_supported": engine.info.positions_supported,
        },
        "target_backends": list(engine.info.target_backends),
    }
    if "baseline" in results and "spec" in results and results["spec"].ttft_s > 0:
        report["speedup"] = results["baseline"].ttft_s / results["spec"].ttft_s
    if args.json:
        print(json.dumps(report, indent=2))
    elif "speedup" in report:
        print(f"TTFT speed-up: {report['speedup']:.2f}x{against(results['baseline'])}", file=sys.stderr)
    return 0


def whole_prompt_tokens(results: dict[str, RunResult]) -> int:
    """The prompt's tokens before any cut: a truncated baseline counts only what was left of it."""
    return max(r.prompt_tokens for r in results.values())


def against(baseline: RunResult) -> str:
    """The speed-up's caveat when the baseline did not see the whole document."""
    note = fit_label(baseline.fit, baseline.seen_fraction)
    return f" (against a baseline that was {note})" if note else ""


def print_events(events, quiet: bool) -> dict[str, RunResult]:
    """Print the events as they come (answer on stdout, the rest on stderr); return the results."""
    results: dict[str, RunResult] = {}
    for event in events:
        if isinstance(event, RunFinished):
            results[event.run] = event.result
            if not quiet:
                print(f"\n{summary_line(event.result)}", file=sys.stderr)
        elif quiet:
            continue
        elif isinstance(event, StageChanged) and event.stage != "done":
            print(f"[{event.run}] {event.stage} {event.detail}".rstrip(), file=sys.stderr, flush=True)
        elif isinstance(event, TokenGenerated):
            print(event.text, end="", flush=True)
        elif isinstance(event, Notice):
            print(f"[{event.run}] {event.message}", file=sys.stderr)
    return results


def summary_line(r: RunResult) -> str:
    line = (
        f"[{r.run}] TTFT {r.ttft_s:.2f}s | prefilled {r.prefill_tokens}/{r.prompt_tokens} tokens | "
        f"decode {r.decode_tok_s:.1f} tok/s"
    )
    if r.run == "spec":
        line += (
            f" | draft {r.draft_s:.2f}s select {r.select_s:.3f}s target prefill {r.target_prefill_s:.2f}s"
            f" | kept {r.kept_fraction:.1%} | positions {r.positions}"
        )
        if r.bypassed:
            line += f" | BYPASSED: {r.bypass_reason} (use --force to run SpecPrefill anyway)"
        elif selection_note(r):
            line += f" | {selection_note(r)}"
    fit = fit_text(r)
    return f"{line} | {fit}" if fit else line


def fit_text(r: RunResult) -> str:
    """How much of a document longer than the window the run saw; "" when it fit.

    "TRUNCATED: 1200 document tokens cut, saw 52% of 2,512 document tokens" (a cut full prefill),
    "fit by selection: saw 18% of 212,400 document tokens" (SpecPrefill)."""
    if r.truncated_tokens:
        return f"TRUNCATED: {r.truncated_tokens} document tokens cut, {seen_text(r.seen_fraction, r.document_tokens)}"
    return fit_label(r.fit, r.seen_fraction, r.document_tokens)
