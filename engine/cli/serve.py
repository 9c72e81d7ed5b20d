"""`specprefill serve`: an OpenAI-compatible server (chat completions, streamed or not) that
answers with SpecPrefill, for the `openai` client, curl or a chat front-end (docs/serve.md).

The model and run options are the settings schema's, as for `run` and `chat`; they are the
defaults each request may change through the `specprefill` extension field. Off loopback the
server needs --api-key (or SPECPREFILL_API_KEY): it refuses to start without one."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from engine.api import DEFAULT_TARGET, SESSION_MODES, ModelSettings, RunSettings, is_loopback, load_engine
from engine.cli.loading import ctrl_c_interrupts
from engine.cli.options import (
    EXIT_USAGE,
    add_model_options,
    add_settings_options,
    model_settings_from,
    run_settings_from,
)
from engine.core.cancel import CancelToken

API_KEY_ENV = "SPECPREFILL_API_KEY"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("serve", help="an OpenAI-compatible HTTP server that answers with SpecPrefill")
    server = p.add_argument_group("server")
    server.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on; anything but loopback needs --api-key (default 127.0.0.1)",
    )
    server.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    server.add_argument(
        "--api-key",
        default=None,
        help=f"the key clients must send as `Authorization: Bearer KEY` (default: the "
        f"{API_KEY_ENV} environment variable; none on loopback)",
    )
    server.add_argument(
        "--model-name",
        default=None,
        help="the model id /v1/models lists and requests name (default: the target file's name)",
    )
    server.add_argument(
        "--mode",
        choices=SESSION_MODES,
        default="auto",
        help="a request's SpecPrefill mode unless it names one: auto (SpecPrefill on long "
        "prompts, the cached full prefix on later turns), spec or baseline (default auto)",
    )
    server.add_argument(
        "--queue",
        type=int,
        default=4,
        help="requests running and waiting at most; more are refused with 429 (default 4)",
    )
    server.add_argument(
        "--max-body-mb",
        type=float,
        default=8.0,
        help="largest request body in MB; a larger one is refused with 413 (default 8)",
    )
    server.add_argument(
        "--cache-gb",
        type=float,
        default=None,
        help="GB of memory for the documents kept warm: the draft's keys and values of the most recently "
        "used ones, so a conversation that comes back is scored from them (the same as --draft-cache-gb; "
        "the full prefixes go to saved states on disk, --state-cache-gb, and come back from there)",
    )
    server.add_argument(
        "--shutdown-timeout",
        type=float,
        default=30.0,
        help="seconds in-flight requests get to finish on SIGTERM before they are cancelled (default 30)",
    )
    add_settings_options(p.add_argument_group("SpecPrefill"), RunSettings)
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def server_options_error(args: argparse.Namespace, api_key: str | None) -> str:
    """Why these options cannot start a server ("" when they can)."""
    if not is_loopback(args.host) and not api_key:
        return (
            f"--host {args.host} listens beyond this machine: give --api-key KEY "
            f"(or set {API_KEY_ENV}), or listen on 127.0.0.1"
        )
    if not 0 < args.port < 65536:
        return f"--port must be between 1 and 65535, got {args.port}"
    if args.queue < 1:
        return f"--queue must be at least 1, got {args.queue}"
    if args.max_body_mb <= 0 or args.shutdown_timeout < 0:
        return "--max-body-mb must be positive and --shutdown-timeout not negative"
    if args.cache_gb is not None and args.cache_gb < 0:
        return f"--cache-gb must not be negative, got {args.cache_gb}"
    return ""


def serve_model_settings(args: argparse.Namespace) -> ModelSettings:
    """The model settings, with --cache-gb as the budget of the documents kept warm."""
    settings = model_settings_from(args)
    return settings if args.cache_gb is None else replace(settings, draft_cache_gb=args.cache_gb)


def model_name_of(target_path) -> str:
    """The id a request names: the target file's name without its suffix."""
    return Path(target_path).stem if target_path else Path(DEFAULT_TARGET.filename).stem


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    if problem := server_options_error(args, api_key):
        print(f"specprefill: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    defaults = run_settings_from(args)  # checked before the models load
    from engine.serve.app import ServeConfig, create_app  # fastapi loads here, not for every verb
    from engine.serve.model_facts import model_facts
    from engine.serve.server import serve
    from engine.serve.worker import EngineWorker

    settings = serve_model_settings(args)
    with ctrl_c_interrupts():
        engine = load_engine(
            settings,
            progress=lambda d, t, label: print(f"[load] {label}", file=sys.stderr, flush=True),
            cancel=cancel,
        )
    try:
        worker = EngineWorker(engine, args.queue, background=defaults.background_prefill)
        name = args.model_name or model_name_of(settings.target_path)
        facts = model_facts(engine.info.target_path, engine.info.n_ctx)
        config = ServeConfig(
            name,
            defaults,
            args.mode,
            api_key,
            int(args.max_body_mb * (1 << 20)),
            facts,
            args.shutdown_timeout,
        )
        print(
            f"specprefill: serving {name!r} on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True
        )
        serve(create_app(worker, config), args.host, args.port, args.shutdown_timeout)
        worker.stop()
    finally:
        engine.close()
    print("specprefill: server stopped", file=sys.stderr, flush=True)
    return 0
