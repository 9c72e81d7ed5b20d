"""`specprefill needles`: needle retrieval in real text longer than the window (draft only, or end to end)."""

from __future__ import annotations

import argparse
import json
import sys

from engine.api import load_document
from engine.api.harness import needles as harness
from engine.cli.loading import load_engine
from engine.cli.options import (
    add_model_options,
    add_run_options,
    doc_arg,
    int_list,
    integers,
    run_settings_from,
)
from engine.core.cancel import CancelToken
from engine.core.errors import SettingsError


def _depths(value: str) -> list[int]:
    depths = integers(value)
    if not depths or min(depths) < 0 or max(depths) > 100:
        raise argparse.ArgumentTypeError(f"depths are percentages of the text, 0..100; got {value!r}")
    return depths


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "needles", help="needle retrieval in real documents joined to a length, one distinct fact per depth"
    )
    p.add_argument(
        "--doc",
        type=doc_arg,
        action="append",
        required=True,
        help="a real document for the haystack (repeat: they are joined in order)",
    )
    p.add_argument(
        "--lengths",
        type=int_list,
        default=[49152],
        help="haystack lengths in tokens, comma-separated (default 49152)",
    )
    p.add_argument(
        "--depths",
        type=_depths,
        default=list(harness.DEPTHS),
        help="percent of the text; each depth gets its own fact (the nearest of 10,30,50,70,90's)",
    )
    p.add_argument(
        "--mode",
        choices=("spec", "both", "baseline"),
        default="spec",
        help="end to end: SpecPrefill, the truncated full prefill, or both",
    )
    p.add_argument(
        "--draft-only",
        choices=harness.DRAFT_READS,
        action="append",
        help="score with the draft only and report whether the selection keeps the fact, reading "
        "past the draft's window in segments or in one pass (repeat to compare)",
    )
    p.add_argument(
        "--together",
        action="store_true",
        help="put every depth's fact in one haystack and ask them one after another in one session, "
        "as follow-up questions (the other facts are distractors; follow-ups reuse the caches, "
        "and each row's served_by says how; a long haystack wants --draft-cache-gb 3)",
    )
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    add_run_options(p, sampling=False)
    add_model_options(p)
    p.set_defaults(command=command, max_new_tokens=32)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    if args.together and args.draft_only:
        raise SettingsError(
            "--together asks the questions end to end in a session; --draft-only scores one "
            "needle at a time without the target: choose one"
        )
    placed = [(depth / 100, harness.needle_for(depth)) for depth in args.depths]
    if args.together:
        try:
            harness.require_distinct(placed)
        except ValueError as error:
            raise SettingsError(f"--together: {error}; got {','.join(map(str, args.depths))}") from None
    settings = run_settings_from(args)
    texts = [load_document(path, cancel=cancel).text for path in args.doc]
    engine = load_engine(args, cancel, quiet=args.json)
    rows = []
    try:
        for n_tokens in args.lengths:
            text = harness.haystack(engine, texts, n_tokens)
            for found in _measure(engine, text, placed, args, settings, cancel):
                for row in harness.as_json(found):
                    rows.append({"length": n_tokens, **row})
                    print(
                        json.dumps(rows[-1]), file=sys.stderr, flush=True
                    )  # as it comes: a run takes minutes
    finally:
        engine.close()
    if args.json:
        print(
            json.dumps(
                {
                    "settings": {
                        "keep": settings.keep,
                        "draft_window": settings.draft_window,
                        "first_scored_layer": settings.first_scored_layer,
                        "score_question": settings.score_question,
                        "question_words": settings.question_words,
                        "n_ctx": engine.info.n_ctx,
                        "positions": settings.positions,
                        "together": args.together,
                    },
                    "docs": [str(p) for p in args.doc],
                    "rows": rows,
                },
                indent=2,
            )
        )
    return 0


def _measure(engine, text: str, placed, args: argparse.Namespace, settings, cancel: CancelToken):
    """The rows of one haystack, a list at a time as they are measured."""
    if args.together:
        for answer in harness.ask_needles_together(engine, text, placed, args.mode, settings, cancel):
            yield [answer]
        return
    for depth, needle in placed:
        doc = harness.insert_needle(text, depth, needle)
        if args.draft_only:
            yield [
                harness.draft_keeps_needle(engine, doc, needle, depth, read, settings, cancel)
                for read in args.draft_only
            ]
        else:
            yield harness.ask_needle(engine, doc, needle, depth, args.mode, settings, cancel)
