"""`specprefill calibrate`: time this machine's draft and target, and store a cost model."""

from __future__ import annotations

import argparse
import json
import sys

from engine.api import load_document
from engine.api.harness import DEFAULT_LENGTHS, Measurement, calibrate_machine
from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, doc_arg, int_list, model_settings_from
from engine.core.cancel import CancelToken
from engine.core.paths import calibration_path
from engine.core.resources import calibration_sample


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "calibrate", help="measure this machine's draft and target speed; store a cost model"
    )
    p.add_argument("--doc", type=doc_arg, default=None, help="text to time on (default: a bundled sample)")
    p.add_argument(
        "--lengths",
        type=int_list,
        default=list(DEFAULT_LENGTHS),
        help="prompt lengths in tokens to time, comma-separated (default "
        + ",".join(map(str, DEFAULT_LENGTHS))
        + ")",
    )
    p.add_argument(
        "--json", action="store_true", help="print the stored cost model and its path as one JSON object"
    )
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    if args.doc is not None:
        text = load_document(args.doc, cancel=cancel).text
    else:
        text = calibration_sample()
    engine = load_engine(args, cancel, quiet=args.json)
    path = calibration_path()
    try:
        model = calibrate_machine(
            engine,
            model_settings_from(args),
            None if args.json else print_step,
            cancel,
            text=text,
            lengths=args.lengths,
            path=path,
            on_measurement=None if args.json else print_measurement,
        )
    finally:
        engine.close()
    if args.json:
        print(json.dumps({"path": str(path), **model.to_json()}, indent=2))
    else:
        print(f"calibration saved to {path}")
    return 0


def print_step(done: int, total: int, message: str) -> None:
    """Before each timing: what it times (the longest take minutes)."""
    print(f"[calibrate] {message}…", file=sys.stderr, flush=True)


def print_measurement(m: Measurement) -> None:
    print(measurement_line(m), file=sys.stderr, flush=True)


def measurement_line(m: Measurement) -> str:
    return (
        f"[calibrate] {m.role:6} {m.tokens:>6} tokens: {m.seconds:6.2f}s ({m.tokens / m.seconds:5.0f} tok/s)"
    )
