"""`specprefill chat`: several questions about one document in one process, reusing the target's
KV cache for the document's prefix (engine.pipeline.session describes the modes). The prefix's
state is saved to the cache after its first full prefill, so a later `chat` about the same
document loads it instead (`served by saved_state`; `specprefill cache` lists and clears them).

In auto mode, while chat waits for the next question on stdin, the document's full prefix is
prefilled in the background (Engine.background_prefill; --no-background-prefill turns it off);
the next question takes the target at once, and the fill resumes after its answer.

Before that, as soon as the models are loaded, the draft reads the document ahead (Engine.read_ahead;
--no-read-ahead turns it off): while chat waits on stdin for the first question, or, with --question,
before the first one. That answer is then `served_by spec_read_ahead` and its read_ahead_s says how
long the draft read ahead; the full fill starts after the read-ahead."""

from __future__ import annotations

import argparse
import io
import itertools
import json
import select
import sys
from collections.abc import Iterator

from engine.api import SESSION_MODES, BackgroundThread, DocumentSession, background_work, load_document
from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, add_run_options, doc_arg, run_settings_from
from engine.cli.run import fit_text, print_events
from engine.core.cancel import CancelToken
from engine.core.events import BackgroundEnded, Notice, ReadAheadEnded, RunResult


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "chat", help="ask several questions about one document, reusing its cached prefix"
    )
    p.add_argument(
        "--doc",
        type=doc_arg,
        required=True,
        help="the document every question is about (a PDF, a text file or a code folder)",
    )
    p.add_argument(
        "--question",
        action="append",
        default=[],
        help="a question (repeat for more); without it, one question per line on stdin",
    )
    p.add_argument(
        "--mode",
        choices=SESSION_MODES,
        default="auto",
        help="baseline: the full prefix, cached after the first question; spec: SpecPrefill "
        "every time; auto: SpecPrefill first, then the full prefix once it is cached (in "
        "the background between questions) or saved (default auto)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object per answer, one per line")
    add_run_options(p, sessions=True)
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def read_questions(given: list[str], stdin) -> Iterator[str]:
    """The --question values, else the non-blank lines of stdin, read as they come (a question
    typed later is answered then); at least one, checked before anything loads unless the first is
    still to be typed (then once the models are loaded: the draft reads the document meanwhile)."""
    questions = (q for q in (line.strip() for line in (given or stdin)) if q)
    return questions if first_question_later(given, stdin) else at_least_one(questions)


def first_question_later(given: list[str], stdin) -> bool:
    """Whether the first question is still to come: no --question, and nothing on stdin yet (not even its end)."""
    if given:
        return False
    try:
        return not select.select([stdin], [], [], 0)[0]
    except (OSError, ValueError, TypeError, io.UnsupportedOperation):  # not a file: read it now
        return False


def at_least_one(questions: Iterator[str]) -> Iterator[str]:
    first = next(questions, None)
    if first is None:
        raise ValueError("no questions: give --question (repeatable) or one question per line on stdin")
    return itertools.chain([first], questions)


def background_line(event: object) -> None:
    """One line on stderr when the read-ahead or the full fill ends (the next question pauses it)."""
    if isinstance(event, ReadAheadEnded):
        what = f"[read-ahead] document {event.done}/{event.total} tokens"
    elif isinstance(event, BackgroundEnded):
        what = f"[background] full prefix {event.done}/{event.total} tokens"
    else:
        return
    detail = f": {event.detail}" if event.detail else ""
    print(f"{what}, {event.status} ({event.seconds:.1f}s){detail}", file=sys.stderr, flush=True)


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    settings = run_settings_from(args)  # checked before the document or the models load
    later = first_question_later(args.question, sys.stdin)
    questions = read_questions(args.question, sys.stdin)
    document = load_document(args.doc, password=args.password, cancel=cancel)
    if not args.json:
        for warning in document.warnings:
            print(f"specprefill: warning: {warning}", file=sys.stderr)
    engine = load_engine(args, cancel, quiet=args.json)
    session = DocumentSession(document)
    read, fill = args.mode != "baseline", args.mode == "auto"  # a full prefill uses no draft
    background = BackgroundThread(background_line)
    try:
        if later:  # the read-ahead, then the full fill, while the first question is typed
            background.start(background_work(engine, session, settings, read_ahead=read, fill=fill))
            questions = at_least_one(questions)
        else:  # the first question is here already: read ahead before it
            for event in background_work(engine, session, settings, read_ahead=read, fill=False)(cancel):
                background_line(event)
        for number, question in enumerate(questions, 1):
            if not args.json:
                print(f"Q{number}: {question}\nA: ", end="", flush=True)
            events = engine.ask(session, question, args.mode, settings, cancel)
            results = print_events(notices_to_stderr(events) if args.json else events, args.json)
            result = next(iter(results.values()))
            print(
                json.dumps({"question": question, **result.to_json()}) if args.json else footer(result),
                flush=True,
            )
            background.start(background_work(engine, session, settings, read_ahead=False, fill=fill))
    finally:
        background.stop()
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
    """The line under an answer: how fast it came, how its prefill was served, and how much of a
    document longer than the window it saw (run.py's wording)."""
    fit = fit_text(r)
    return (
        f"\n   TTFT {r.ttft_s:.2f}s | served by {r.served_by} | prefilled {r.prefill_tokens}/"
        f"{r.prompt_tokens} tokens{f' | {fit}' if fit else ''}\n"
    )
