"""`bench --target-shape NAME`: time a target of another size without having it.

The target becomes a random-weight GGUF with that model's shape (engine/models/shapes.py), written
once into the cache. Its file name says "timing-only", so every report that names the target
says so too; its answers mean nothing.
"""

from __future__ import annotations

import argparse
import sys

from engine.api.maintenance import SHAPES, TIMING_ONLY, ensure_shape_file, shape_by_name
from engine.api.maintenance import model_defaults as defaults
from engine.core.cancel import CancelToken
from engine.core.paths import shapes_dir


def add_target_shape_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target-shape",
        choices=sorted(SHAPES),
        default=None,
        help="time a random-weight target with this model's shape instead of --target "
        f"({TIMING_ONLY}: written once into the cache, 4.7 GB for 7B, 9.0 GB for 14B)",
    )


def apply_target_shape(args: argparse.Namespace, cancel: CancelToken) -> None:
    """Point --target at the shape's file, writing it first if needed."""
    if not getattr(args, "target_shape", None):
        return
    if args.target is not None:
        raise ValueError("--target-shape replaces the target: give it or --target, not both")
    shape = shape_by_name(args.target_shape)
    vocab_source = defaults.TARGET.path  # the default draft scores in this vocabulary
    quiet = getattr(args, "json", False)

    def progress(done: int, total: int) -> None:
        if not quiet and (done == total or done % 50 == 0):
            print(
                f"[bench] writing the {shape.label}-shaped target ({TIMING_ONLY}): {done}/{total} tensors",
                file=sys.stderr,
                flush=True,
            )

    args.target = ensure_shape_file(shape, vocab_source, shapes_dir(), cancel, progress)
    if not quiet:
        print(
            f"[bench] target: {shape.label} shape, {TIMING_ONLY} ({args.target})", file=sys.stderr, flush=True
        )
