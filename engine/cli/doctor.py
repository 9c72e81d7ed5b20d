"""`specprefill doctor`: one line per component; exit 0 when the app can run, 2 with the reason when not."""

from __future__ import annotations

import argparse

from engine.api.maintenance import Check, diagnose
from engine.cli.options import add_model_options, model_settings_from
from engine.core.cancel import CancelToken
from engine.core.errors import DefaultModelsError, ModelError


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "doctor", help="versions, build flags, devices, models and calibration; exit 0 when the app can run"
    )
    add_model_options(p)
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    checks = diagnose(model_settings_from(args))
    for check in checks:
        print(f"{check.name + ':':13} {check.text}")
    failed = next((check for check in checks if not check.ok), None)
    if failed is not None:  # main() prints it as the one error line, exit 2, with the CLI's remedy
        raise failure(failed, args)
    return 0


def failure(check: Check, args: argparse.Namespace) -> ModelError:
    """The error a failed check means: a model's (default or custom) or the draft's device."""
    if check.name not in ("target", "draft"):
        return ModelError(f"cannot run: {check.name}: {check.text}")
    custom = getattr(args, check.name) is not None  # --target / --draft
    error = ModelError if custom else DefaultModelsError
    return error(f"cannot run: the {check.name} model {check.text}")
