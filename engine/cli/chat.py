"""`specprefill chat`: several questions about one document in one process, reusing the target's
KV cache for the document's prefix (engine.pipeline.session describes the modes). The prefix's
state is saved to the cache after its first full prefill, so a later `chat` about the same
document loads it instead (`served by saved_state`; `specprefill cache` lists and clears them).

In auto mode, while chat waits for the next question on stdin, the document's full prefix is
prefilled in the background (Engine.background_prefill; --no-background-prefill turns it off);
the next question takes the target at once, and the fill resumes after its answer."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
from collections.abc import Iterator

from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, add_run_options, path_arg, run_settings_from
from engine.cli.run import fit_text, print_events
from engine.core.cancel import CancelToken
from engine.core.events import BackgroundEnded, Notice, RunResult
from engine.ingest import load_document
from engine.pipeline import SESSION_MODES, DocumentSession


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("chat", help="ask several questions about one document, reusing its cached prefix")
    p.add_argument("--doc", type=path_arg, required=True,
                   help="the document every question is about (a PDF, a text file or a code folder)")
    p.add_argument("--question", action="append", default=[],
                   help="a question (repeat for more); without it, one question per line on stdin")
    p.add_argument("--mode", choices=SESSION_MODES, default="auto",
                   help="baseline: the full prefix, cached after the first question; spec: SpecPrefill "
                        "every time; auto: SpecPrefill first, then the full prefix once it is cached (in "
                        "the background between questions) or saved (default auto)")
    p.add_argument("--json", action="store_true", help="print one JSON object per answer, one per line")
    add_run_options(p, sessions=True)
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def read_questions(given: list[str], stdin) -> Iterator[str]:
    """The --question values, else the non-blank lines of stdin, read as they come (a question
    typed later is answered then); at least one, checked before anything loads."""
    lines = (line.strip() for line in (given or stdin))
    questions = (q for q in lines if q)
    first = next(questions, None)
    if first is None:
        raise ValueError("no questions: give --question (repeatable) or one question per line on stdin")
    return itertools.chain([first], questions)


class BackgroundFill:
    """The engine's background full prefill on a thread, between questions; one line on stderr when
    it ends (the next question pauses it)."""

    def __init__(self, engine, session: DocumentSession, settings, enabled: bool):
        self.engine, self.session, self.settings, self.enabled = engine, session, settings, enabled
        self.cancel = CancelToken()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.wait()
        if self.enabled and self.engine.background_needed(self.session, self.settings):
            self.thread = threading.Thread(target=self._fill, name="background-prefill", daemon=True)
            self.thread.start()

    def _fill(self) -> None:
        for event in self.engine.background_prefill(self.session, self.settings, self.cancel):
            if isinstance(event, BackgroundEnded):
                detail = f": {event.detail}" if event.detail else ""
                print(f"[background] full prefix {event.done}/{event.total} tokens, {event.status} "
                      f"({event.seconds:.1f}s){detail}", file=sys.stderr, flush=True)

    def wait(self) -> None:
        if self.thread is not None:
            self.thread.join()
            self.thread = None

    def stop(self) -> None:
        self.cancel.cancel()  # the batch under way aborts
        self.wait()


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    settings = run_settings_from(args)  # checked before the document or the models load
    questions = read_questions(args.question, sys.stdin)
    document = load_document(args.doc, password=args.password, cancel=cancel)
    if not args.json:
        for warning in document.warnings:
            print(f"specprefill: warning: {warning}", file=sys.stderr)
    engine = load_engine(args, cancel, quiet=args.json)
    session = DocumentSession(document)
    background = BackgroundFill(engine, session, settings, enabled=args.mode == "auto")
    try:
        for number, question in enumerate(questions, 1):
            if not args.json:
                print(f"Q{number}: {question}\nA: ", end="", flush=True)
            events = engine.ask(session, question, args.mode, settings, cancel)
            results = print_events(notices_to_stderr(events) if args.json else events, args.json)
            result = next(iter(results.values()))
            print(json.dumps({"question": question, **result.to_json()}) if args.json else footer(result),
                  flush=True)
            background.start()
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
    return (f"\n   TTFT {r.ttft_s:.2f}s | served by {r.served_by} | prefilled {r.prefill_tokens}/"
            f"{r.prompt_tokens} tokens{f' | {fit}' if fit else ''}\n")
