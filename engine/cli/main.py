"""`specprefill`: the parser (one module per verb), error handling and exit codes.

Errors a user can fix end in one line on stderr and exit code 2, never a traceback. The
engine's messages say what went wrong; the remedy in terms of this command line's flags
is added here, since the app words the same remedy in its own terms.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from engine.cli import (
    ab,
    bench,
    cache,
    calibrate,
    chat,
    doctor,
    estimate,
    models,
    needles,
    run,
    serve,
    worker,
)
from engine.cli.loading import install_ctrl_c
from engine.cli.options import EXIT_USAGE, OneLineParser
from engine.core.about import app_version
from engine.core.cancel import CancelToken
from engine.core.errors import (
    Cancelled,
    ContextOverflowError,
    DefaultModelsError,
    NotCalibratedError,
    PasswordError,
    PositionsUnsupportedError,
    SpecPrefillError,
)

EXIT_INTERNAL = 1
EXIT_CANCELLED = 130
EXIT_READER_GONE = 141  # 128 + SIGPIPE, what a shell tool ends with in `| head`
VERBS = (run, chat, serve, cache, models, doctor, bench, calibrate, estimate, ab, needles, worker)

# The remedy each error type gets on this command line, most specific type first.
REMEDIES: tuple[tuple[type[Exception], str], ...] = (
    (PasswordError, "give it with --password"),
    (DefaultModelsError, "re-assemble the defaults with `specprefill models --assemble`"),
    (PositionsUnsupportedError, "use --positions renumber or auto"),
    (NotCalibratedError, "run `specprefill calibrate` first"),
    (ContextOverflowError, "--mode spec fits a long document by selection; --truncate cuts its end"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="specprefill", description="Speculative Prefill for long documents")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log what the engine does, and print the traceback of an internal error",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"specprefill {app_version()}",
        help="print the version and exit",
    )
    sub = parser.add_subparsers(dest="verb", required=True, parser_class=OneLineParser)
    for verb in VERBS:
        verb.add_parser(sub)
    return parser


def remedy_for(error: Exception) -> str:
    return next((text for kind, text in REMEDIES if isinstance(error, kind)), "")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    cancel = CancelToken()
    install_ctrl_c(cancel)
    try:
        return args.command(args, cancel)
    except BrokenPipeError:
        return _reader_gone()
    except (SpecPrefillError, ValueError, OSError) as exc:
        remedy = remedy_for(exc)
        return _fail(EXIT_USAGE, f"error: {exc}" + (f" ({remedy})" if remedy else ""))
    except (Cancelled, KeyboardInterrupt):
        return _fail(EXIT_CANCELLED, "cancelled")
    except MemoryError:
        return _fail(
            EXIT_USAGE, "error: out of memory; close other programs or use a smaller context or document"
        )
    except Exception as exc:  # a bug: one line by default, the traceback with -v
        if args.verbose:
            logging.getLogger("specprefill").exception("unexpected error")
        return _fail(EXIT_INTERNAL, f"internal error: {type(exc).__name__}: {exc} (run with -v for details)")


def _reader_gone() -> int:
    """stdout's reader went away (`specprefill run … | head`): end quietly. stdout then points at
    /dev/null, or Python's flush at exit would report the broken pipe once more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_READER_GONE


def _fail(code: int, message: str) -> int:
    """The one line a failed command leaves on stderr (a message with newlines is folded)."""
    print("specprefill: " + " ".join(message.split()), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
