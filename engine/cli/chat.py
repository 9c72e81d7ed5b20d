"""`specprefill chat`: several questions about one document in one process, reusing the target's
KV cache for the document's prefix (engine.pipeline.session describes the modes). The prefix's
state is saved to the cache after its first full prefill, so a later `chat` about the same
document loads it instead (`served by saved_state`; `specprefill cache` lists and clears them)."""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, add_run_options, path_arg, run_settings_from
from engine.cli.run import print_events
from engine.core.cancel import CancelToken
from engine.core.events import Notice, RunResult
from engine.ingest import load_document
from engine.pipeline import SESSION_MODES, DocumentSession


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("chat", help="ask several questions about one document, reusing its cached prefix")
    p.add_argument("--doc", type=path_arg, required=True)
    p.add_argument("--question", action="append", default=[],
                   help="a question (repeat for more); without it, one question per line on stdin")
    p.add_argument("--mode", choices=SESSION_MODES, default="auto",
                   help="baseline: the full prefix, cached after the first question; spec: SpecPrefill "
                        "every time; auto: SpecPrefill first, then the cached full prefix (default auto)")
    p.add_argument("--json", action="store_true", help="print one JSON object per answer, one per line")
    add_run_options(p, sessions=True)
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def read_questions(given: list[str], stdin) -> list[str]:
    """The --question values, else the non-blank lines of stdin."""
    questions = [q.strip() for q in (given or stdin.read().splitlines()) if q.strip()]
    if not questions:
        raise ValueError("no questions: give --question (repeatable) or one question per line on stdin")
    return questions


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    settings = run_settings_from(args)  # checked before the document or the models load
    questions = read_questions(args.question, sys.stdin)
    document = load_document(args.doc, password=args.password, cancel=cancel)
    if not args.json:
        for warning in document.warnings:
            print(f"specprefill: warning: {warning}", file=sys.stderr)
    engine = load_engine(args, cancel, quiet=args.json)
    session = DocumentSession(document)
    try:
        for number, question in enumerate(questions, 1):
            if not args.json:
                print(f"Q{number}: {question}\nA: ", end="", flush=True)
            events = engine.ask(session, question, args.mode, settings, cancel)
            results = print_events(notices_to_stderr(events) if args.json else events, args.json)
            result = next(iter(results.values()))
            print(json.dumps({"question": question, **result.to_json()}) if args.json else footer(result),
                  flush=True)
    finally:
        engine.close()
    return 0


def notices_to_stderr(events):
    """The events, with each notice also printed on stderr: --json keeps stdout to the answers, and
    a saved state that was not used still says so."""
    for event in events:
        if isinstance(event, Notice):
            print(f"specprefill: notice: {event.message}", file=sys.stderr, flush=True)
        yield event


def footer(r: RunResult) -> str:
    """The line under an answer: how fast it came and how its prefill was served."""
    return (f"\n   TTFT {r.ttft_s:.2f}s | served by {r.served_by} | prefilled {r.prefill_tokens}/"
            f"{r.prompt_tokens} tokens\n")
