"""Everything the GUI remembers between sessions, kept in one QSettings.

The settings are read and written by one loop over the engine's settings schema
(engine.api.options): every model setting, and the run settings the Settings dialog edits
(those with a label), under "models/<field>" and "run/<field>". A value read back is
coerced to its field's type and checked by the field's Option; one that is missing,
unreadable or refused reads as the field's default. So no default, range or choice is
written here. ModelSettings also checks its fields together (an RPC worker's format, a layer
split with one weight per worker): where it refuses the stored whole, the one field whose
default makes it acceptable reads as that default. Tests pass a QSettings on a temporary ini file.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings

from desktop.model.preferences import (
    KEEP_DEFAULT,
    KEEP_MAX,
    KEEP_MIN,
    PREFERENCE_FIELDS,
    RunPreferences,
    schema_fields,
)
from engine.api import ModelSettings, Option, RunSettings, SettingsError, option_of, value_type

log = logging.getLogger(__name__)

ORGANIZATION = "SpecPrefill"
APPLICATION = "specprefill-gui"
MAX_RECENT = 10
MODELS, RUN = "models", "run"  # the QSettings groups of ModelSettings and RunSettings
AUTOMATIC = "auto"  # how None is stored where 0 is an allowed value (min_tokens); elsewhere it is 0 or ""


def default_qsettings() -> QSettings:
    return QSettings(ORGANIZATION, APPLICATION)


class SettingsStore:
    def __init__(self, settings: QSettings) -> None:
        self._s = settings

    # --- settings from the schema -------------------------------------------------------------

    def model_settings(self) -> ModelSettings:
        values = self._read_fields(MODELS, ModelSettings, schema_fields(ModelSettings))
        try:
            return ModelSettings(**values)
        except SettingsError as exc:  # a hand-edited file must not stop the app from starting
            log.warning("ignoring a stored model setting: %s", exc)
            return _with_one_field_reset(values)

    def save_model_settings(self, settings: ModelSettings) -> None:
        self._write_fields(MODELS, ModelSettings, asdict(settings))

    def run_preferences(self) -> RunPreferences:
        return RunPreferences(**self._read_fields(RUN, RunSettings, PREFERENCE_FIELDS))

    def save_run_preferences(self, prefs: RunPreferences) -> None:
        self._write_fields(RUN, RunSettings, asdict(prefs))

    # --- the main window's own controls -----------------------------------------------------------

    def keep_percent(self) -> int:
        try:
            percent = int(self._s.value("ui/keep_percent", KEEP_DEFAULT))
        except (TypeError, ValueError):
            return KEEP_DEFAULT
        return min(max(percent, KEEP_MIN), KEEP_MAX)

    def save_keep_percent(self, percent: int) -> None:
        self._s.setValue("ui/keep_percent", percent)

    def keep_auto(self) -> bool:
        """Whether the keep is auto (chosen per question); off by default."""
        return self._flag("ui/keep_auto", False)

    def save_keep_auto(self, auto: bool) -> None:
        self._s.setValue("ui/keep_auto", int(auto))

    def position_mode(self) -> str:
        return self._read("ui/position_mode", RunSettings, "positions")

    def save_position_mode(self, mode: str) -> None:
        self._s.setValue("ui/position_mode", mode)

    # --- the window's layout and view choices ----------------------------------------------------

    def window_geometry(self) -> QByteArray | None:
        return self._bytes("ui/geometry")

    def splitter_state(self, name: str) -> QByteArray | None:
        return self._bytes(f"ui/splitters/{name}")

    def save_layout(self, geometry: QByteArray, splitters: dict[str, QByteArray]) -> None:
        """The window's geometry and each named splitter's state, written at once (the app exits next)."""
        self._s.setValue("ui/geometry", geometry)
        for name, state in splitters.items():
            self._s.setValue(f"ui/splitters/{name}", state)
        self._s.sync()

    def answer_markdown(self) -> bool:
        """Whether finished answers render as Markdown (else plain text); on by default."""
        return self._flag("ui/answer_markdown", True)

    def save_answer_markdown(self, on: bool) -> None:
        self._s.setValue("ui/answer_markdown", int(on))
        self._s.sync()

    def _flag(self, key: str, default: bool) -> bool:
        """A stored on/off choice: ini files hold it as 0/1, older ones as false/true."""
        return str(self._s.value(key, int(default))).lower() not in ("0", "false")

    def _bytes(self, key: str) -> QByteArray | None:
        raw = self._s.value(key)
        return raw if isinstance(raw, QByteArray) and not raw.isEmpty() else None

    # --- recent files --------------------------------------------------------------------------

    def recent_files(self) -> list[str]:
        raw = str(self._s.value("recent/files", "") or "")
        return [line for line in raw.split("\n") if line]

    def add_recent(self, path: str) -> None:
        paths = [path] + [p for p in self.recent_files() if p != path]
        self._save_recent(paths[:MAX_RECENT])

    def remove_recent(self, path: str) -> None:
        self._save_recent([p for p in self.recent_files() if p != path])

    def clear_recent(self) -> None:
        self._save_recent([])

    def _save_recent(self, paths: list[str]) -> None:
        # One newline-joined string: list values round-trip unreliably through ini files.
        self._s.setValue("recent/files", "\n".join(paths))
        self._s.sync()

    # --- reading and writing one field -------------------------------------------------------------

    def _read_fields(self, group: str, cls: type, names: list[str]) -> dict[str, Any]:
        return {name: self._read(f"{group}/{name}", cls, name) for name in names}

    def _write_fields(self, group: str, cls: type, values: dict[str, Any]) -> None:
        for name, value in values.items():
            self._s.setValue(f"{group}/{name}", _stored(value, value_type(cls, name), option_of(cls, name)))
        self._s.sync()

    def _read(self, key: str, cls: type, name: str) -> Any:
        """The stored value of field `name`, or its default when missing, unreadable or refused by its Option."""
        default = getattr(cls, name)  # a dataclass keeps each field's default as a class attribute
        raw = self._s.value(key)
        if raw is None:
            return default
        option = option_of(cls, name)
        try:
            value = _parsed(str(raw).strip(), value_type(cls, name), option)
            option.check(name, value)
        except (TypeError, ValueError) as exc:  # SettingsError is a ValueError
            log.warning("ignoring the stored %s (%s): %s", key, raw, exc)
            return default
        return value


def _with_one_field_reset(values: dict[str, Any]) -> ModelSettings:
    """The stored model settings with the first field reset to its default that makes them acceptable;
    all defaults when no single field does."""
    for name, value in values.items():
        default = getattr(ModelSettings, name)
        if value == default:
            continue
        try:
            return ModelSettings(**{**values, name: default})
        except SettingsError:
            continue
    return ModelSettings()


def _stored_none(kind: type, option: Option) -> int | str:
    """How a None (automatic) value is stored: "" for a path, 0 where 0 is not allowed, else "auto"."""
    if kind is Path:
        return ""
    return 0 if option.minimum is not None and option.minimum > 0 else AUTOMATIC


def _stored(value: Any, kind: type, option: Option) -> Any:
    if value is None:
        return _stored_none(kind, option)
    if kind is bool:
        return int(value)  # ini files keep 0/1 unambiguously
    return str(value) if kind is Path else value


_BOOLEANS = {"1": True, "true": True, "0": False, "false": False}


def _parsed(text: str, kind: type, option: Option) -> Any:
    """A stored text as the field's value; ValueError when it is not one."""
    if option.none_means and text == str(_stored_none(kind, option)):
        return None
    if kind is Path:
        return Path(text).expanduser()
    if kind is bool:
        if text.lower() not in _BOOLEANS:
            raise ValueError(f"expected 0 or 1, got {text!r}")
        return _BOOLEANS[text.lower()]
    return kind(text)
