"""Command-line options generated from the settings schema (engine.core.settings).

Every flag's name, type, default, choices and help come from the field's Option, and each
value is checked by the same Option.check the engine uses, so a bad value is one line on
stderr with exit code 2 before any model loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.api.maintenance import resolve_model
from engine.core.errors import SettingsError
from engine.core.samples import resolve_sample_path
from engine.core.setting_schema import Option, describe, options, value_type
from engine.core.settings import SESSION_ONLY_SETTINGS, ModelSettings, RunSettings, sampling_fields

EXIT_USAGE = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other error here."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def flag_of(name: str, option: Option) -> str:
    return option.flag or "--" + name.replace("_", "-")


def dest_of(name: str, option: Option) -> str:
    """The attribute argparse stores the flag in: --threads -> args.threads."""
    return flag_of(name, option).lstrip("-").replace("-", "_")


def _converter(base: type, name: str, option: Option):
    """argparse `type=`: parse the text, then check it against the schema."""

    def convert(text: str) -> Any:
        if text in option.words:
            return text
        try:
            value = base(text)
        except ValueError:
            kind = {int: "a whole number", float: "a number"}.get(base, base.__name__)
            kind = " or ".join((kind, *option.words))
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        try:
            option.check(describe(name, option), value)
        except SettingsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    convert.__name__ = base.__name__  # argparse names the type in its messages
    return convert


def _help(option: Option, default: Any) -> str:
    if default is None or isinstance(default, bool) or "default" in option.help:
        return option.help
    return f"{option.help} (default {default})"


def add_settings_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    skip: tuple[str, ...] = (),
    only: tuple[str, ...] | None = None,
) -> None:
    """One option per field of `cls` that the CLI exposes, straight from the schema."""
    for name, option, default in options(cls):
        if option.flag == "" or name in skip or (only is not None and name not in only):
            continue
        base = value_type(cls, name)
        flag = flag_of(name, option)
        if base is bool:  # --flag for an option off by default; --flag/--no-flag for one on by default
            action = argparse.BooleanOptionalAction if default else "store_true"
            parser.add_argument(
                flag, dest=dest_of(name, option), action=action, default=bool(default), help=option.help
            )
            continue
        kwargs: dict[str, Any] = dict(
            dest=dest_of(name, option),
            default=default,
            help=_help(option, default),
            metavar=dest_of(name, option).upper(),
            type=_converter(base, name, option),
        )
        if option.choices:
            kwargs["choices"] = option.choices
        parser.add_argument(flag, **kwargs)


def add_model_options(parser: argparse.ArgumentParser) -> None:
    add_settings_options(parser.add_argument_group("models"), ModelSettings)


def add_run_options(
    parser: argparse.ArgumentParser,
    *,
    skip: tuple[str, ...] = (),
    sessions: bool = False,
    sampling: bool = True,
) -> None:
    """The RunSettings options; those only sessions use (SESSION_ONLY_SETTINGS) with `sessions` only,
    and the sampling ones with `sampling` only (a verb that compares decodes greedily: it has none)."""
    group = parser.add_argument_group("SpecPrefill")
    skip = skip if sessions else (*skip, *SESSION_ONLY_SETTINGS)
    add_settings_options(group, RunSettings, skip if sampling else (*skip, *sampling_fields()))
    group.add_argument("--password", default=None, help="password of an encrypted PDF")


def settings_from(args: argparse.Namespace, cls: type, **overrides: Any):
    """A settings object from the parsed options; fields the CLI does not expose keep their defaults."""
    values = {
        name: getattr(args, dest_of(name, option))
        for name, option, _ in options(cls)
        if option.flag != "" and hasattr(args, dest_of(name, option))
    }
    values.update(overrides)
    return cls(**values)


def model_settings_from(args: argparse.Namespace) -> ModelSettings:
    """--target and --draft take a path or a name `models --discover` lists (looked up only when no such path exists)."""
    settings = settings_from(args, ModelSettings)
    for name in ("target_path", "draft_path"):
        if getattr(settings, name) is not None:
            setattr(settings, name, resolve_model(getattr(settings, name)))
    return settings


def run_settings_from(args: argparse.Namespace, **overrides: Any) -> RunSettings:
    return settings_from(args, RunSettings, **overrides)


def comma_items(value: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c']: the non-empty items of a comma-separated option."""
    return [item.strip() for item in value.split(",") if item.strip()]


def integers(value: str) -> list[int]:
    """'2048,4096' -> [2048, 4096]; anything else than integers is an argparse error."""
    try:
        return [int(item) for item in comma_items(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None


def int_list(value: str) -> list[int]:
    """'2048,4096' -> [2048, 4096]: prompt lengths of at least 64 tokens."""
    items = integers(value)
    if not items or min(items) < 64:
        raise argparse.ArgumentTypeError(f"lengths must be integers of at least 64, got {value!r}")
    return items


def path_arg(value: str) -> Path:
    return Path(value).expanduser()


def doc_arg(value: str) -> Path:
    """A `--doc` path; one that names a bundled sample code base (`resources/samples/code/toolz`)
    is its archive, extracted once into the user cache."""
    return resolve_sample_path(path_arg(value))
