"""The machinery of the settings schema (engine.core.settings): each field of a settings dataclass
carries an `Option` (help, label, range, choices) in its metadata, from which the CLI, the app's
Settings dialog and validation are generated."""

from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from engine.core.errors import SettingsError


@dataclass(frozen=True)
class Option:
    """What a front end needs to know about one setting."""

    help: str
    label: str = ""  # the Settings dialog's label; "" when the app does not edit it
    minimum: float | None = None
    maximum: float | None = None
    above_minimum: bool = False  # the minimum itself is not allowed (keep > 0)
    odd: bool = False
    choices: tuple[str, ...] = ()
    choice_labels: tuple[tuple[str, str], ...] = ()  # (choice, how the app shows it), where it differs
    flag: str | None = None  # the CLI flag; None: derived from the field name; "": not on the CLI
    none_means: str = ""  # what None stands for, where None is allowed
    zero_means: str = ""  # what 0 stands for, where 0 is special
    what: str = ""  # the setting's name in messages; "": the field name in words
    words: tuple[str, ...] = ()  # words a numeric setting also takes ("auto"), besides numbers in its range
    group: str = ""  # the Settings dialog's group box for it; "": the main rows

    def label_for(self, choice: str) -> str:
        return dict(self.choice_labels).get(choice, choice)

    def check(self, name: str, value: Any) -> None:
        """Raise SettingsError when `value` is outside this option's range or choices."""
        if value is None:
            if not self.none_means:
                raise SettingsError(f"{name} must be set")
            return
        if isinstance(value, str) and self.words:
            if value in self.words:
                return
            raise SettingsError(
                f"{name} must be a number {self._range_text()} or {' or '.join(self.words)}, got {value!r}"
            )
        if self.choices and value not in self.choices:
            raise SettingsError(f"{name} must be one of {', '.join(self.choices)}, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        if not math.isfinite(value):
            raise SettingsError(f"{name} must be a finite number, got {value}")
        if self.minimum is not None and (
            value < self.minimum or (self.above_minimum and value == self.minimum)
        ):
            raise SettingsError(f"{name} must be {self._range_text()}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise SettingsError(f"{name} must be {self._range_text()}, got {value}")
        if self.odd and int(value) % 2 == 0:
            raise SettingsError(f"{name} must be an odd number, got {value}")

    def _range_text(self) -> str:
        low = "(" if self.above_minimum else "["
        if self.maximum is None:
            return f"{'more than' if self.above_minimum else 'at least'} {_number(self.minimum)}"
        return f"in {low}{_number(self.minimum)}, {_number(self.maximum)}]"


def _number(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


def setting(default: Any, **option: Any) -> Any:
    """A dataclass field with its Option in the field's metadata."""
    return field(default=default, metadata={"option": Option(**option)})


@cache
def value_type(cls: type, name: str) -> type:
    """A settings field's value type with None and Literal unwrapped: int, float, str, bool or Path."""
    hint = get_type_hints(cls)[name]
    if get_origin(hint) in (Union, UnionType):
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
    return str if get_origin(hint) is Literal else hint


def option_of(cls: type, name: str) -> Option:
    return next(f.metadata["option"] for f in fields(cls) if f.name == name)


def options(cls: type) -> list[tuple[str, Option, Any]]:
    """(field name, Option, default) for every field of a settings class, in declaration order."""
    return [
        (f.name, f.metadata["option"], f.default if f.default is not MISSING else None)
        for f in fields(cls)
        if "option" in f.metadata
    ]


def describe(name: str, option: Option) -> str:
    """How messages name a setting: "chunk size", "context size"."""
    return option.what or name.replace("_", " ")


def validate(settings: Any) -> None:
    """Check every field of a settings object against its Option."""
    for name, option, _ in options(type(settings)):
        option.check(describe(name, option), getattr(settings, name))
