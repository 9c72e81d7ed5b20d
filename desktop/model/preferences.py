"""The run preferences the Settings dialog edits, and the keep slider's span: generated from the
engine's settings schema (engine.api.options), so no default, range or choice is written here."""

from __future__ import annotations

from dataclasses import asdict, field, fields, make_dataclass

from engine.api import RunSettings, options

KEEP_MIN, KEEP_MAX = 5, 90  # percent: the slider's span, inside the schema's (0, 1]
KEEP_DEFAULT = round(RunSettings.keep * 100)  # a dataclass keeps each field's default as a class attribute


def schema_fields(cls: type) -> list[str]:
    return [name for name, _, _ in options(cls)]


def dialog_fields(cls: type) -> list[str]:
    """The fields the Settings dialog edits: those the schema gives a label."""
    return [name for name, option, _ in options(cls) if option.label]


def _run_settings(self, keep: float | str, positions: str) -> RunSettings:
    # The field names are RunSettings' own, so every preference carries over by name.
    return RunSettings(keep=keep, positions=positions, **asdict(self))


# The RunSettings fields the Settings dialog edits, with the schema's defaults; keep and
# positions come from the main window. Generated, so a field added to the schema with a
# label appears here, in the dialog and in QSettings at once.
PREFERENCE_FIELDS = dialog_fields(RunSettings)
RunPreferences = make_dataclass(
    "RunPreferences",
    [(f.name, f.type, field(default=f.default)) for f in fields(RunSettings) if f.name in PREFERENCE_FIELDS],
    namespace={"run_settings": _run_settings, "__doc__": "The run settings the Settings dialog edits."},
)
