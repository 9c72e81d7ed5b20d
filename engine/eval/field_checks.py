"""A saved report's numbers and flags, checked as it is read back: text where a number or a flag
belongs is refused with a ReportFieldError that names the case and the field."""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from types import NoneType, UnionType
from typing import Union, get_args, get_origin, get_type_hints

from engine.core.errors import SpecPrefillError


class ReportFieldError(SpecPrefillError, TypeError):
    """A saved report's field holds the wrong kind of value: text, say, where a number or a flag belongs.
    A TypeError too, so a damaged journal line reads as one."""


def require_numbers_and_flags(cls: type, data: dict, where: str) -> None:
    """Raise ReportFieldError, naming `where` and the field, unless each field of the dataclass `cls` that
    takes a number or a flag holds one in `data` (or None where the field allows it). A report read back is
    rendered again, and its numbers go through formatting: text there would reach the page or the CSV."""
    for name, (kinds, optional) in _number_and_flag_fields(cls).items():
        if name in data and not _holds(data[name], kinds, optional):
            raise ReportFieldError(
                f"{where}: {name} must be {_kind_name(kinds, optional)}, not {data[name]!r:.60}"
            )


@cache
def _number_and_flag_fields(cls: type) -> dict[str, tuple[frozenset[type], bool]]:
    """By name, the fields of `cls` typed int, float or bool: the types each takes, and whether it takes None."""
    hints = get_type_hints(cls)
    found = {}
    for f in fields(cls):
        hint = hints[f.name]
        members = get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,)
        kinds = {m for m in members if m is not NoneType}
        if kinds and kinds <= {int, float, bool}:
            found[f.name] = (frozenset(kinds | ({int} if float in kinds else set())), NoneType in members)
    return found


def _holds(value, kinds: frozenset[type], optional: bool) -> bool:
    if value is None:
        return optional
    if isinstance(value, bool):  # Python counts a bool as an int; a report never does
        return bool in kinds
    return isinstance(value, tuple(kinds))


def _kind_name(kinds: frozenset[type], optional: bool) -> str:
    name = "a number" if float in kinds else "an integer" if int in kinds else "true or false"
    return f"{name} or null" if optional else name
