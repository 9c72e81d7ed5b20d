"""`specprefill calibrate`: time this machine's draft and target, and store a cost model."""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli.loading import load_engine
from engine.cli.options import add_model_options, int_list, path_arg
from engine.core.cancel import CancelToken
from engine.core.resources import calibration_sample
from engine.eval.calibrate import Measurement, calibrate
from engine.ingest import load_document
from engine.pipeline import costmodel


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("calibrate", help="measure this machine's draft and target speed; store a cost model")
    p.add_argument("--doc", type=path_arg, default=None, help="text to time on (default: a bundled sample)")
    p.add_argument("--lengths", type=int_list, default=[1024, 4096, 8192])  # spread: the n^2 term shows
    p.add_argument("--json", action="store_true")
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    if args.doc is not None:
        text = load_document(args.doc, cancel=cancel).text
    else:
        text = calibration_sample()
    engine = load_engine(args, cancel, quiet=args.json)
    model = None
    try:
        for item in calibrate(engine, text, args.lengths, cancel=cancel):
            if isinstance(item, costmodel.CostModel):
                model = item
            elif not args.json:
                print(measurement_line(item), file=sys.stderr, flush=True)
    finally:
        engine.close()
    model.machine.update(draft_quant=args.draft_quant, threads=args.threads)
    path = costmodel.save(model)
    if args.json:
        print(json.dumps({"path": str(path), **model.to_json()}, indent=2))
    else:
        print(f"calibration saved to {path}")
    return 0


def measurement_line(m: Measurement) -> str:
    return f"[calibrate] {m.role:6} {m.tokens:>6} tokens: {m.seconds:6.2f}s ({m.tokens / m.seconds:5.0f} tok/s)"
