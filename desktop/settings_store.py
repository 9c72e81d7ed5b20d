"""Everything the GUI remembers between sessions, kept in one QSettings.

Defaults come from the engine's own dataclasses, so the GUI never carries a
second copy of them. Tests pass a QSettings on a temporary ini file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

from PySide6.QtCore import QSettings

from engine.api import ModelSettings, RunSettings
from desktop.run_controls import KEEP_DEFAULT, KEEP_MAX, KEEP_MIN

ORGANIZATION = "SpecPrefill"
APPLICATION = "specprefill-gui"
MAX_RECENT = 10
_DEFAULT_MODELS = ModelSettings()
_DEFAULT_RUN = RunSettings()


AUTOMATIC = "auto"  # how an automatic threshold (min_tokens None) is stored


@dataclass
class RunPreferences:
    """The RunSettings fields the Settings dialog edits; keep and positions come from the main window."""

    chunk_size: int = _DEFAULT_RUN.chunk_size
    lookahead: int = _DEFAULT_RUN.lookahead
    draft_window: int = _DEFAULT_RUN.draft_window  # 0: the draft's prefill attends to everything
    max_new_tokens: int = _DEFAULT_RUN.max_new_tokens
    min_tokens: int | None = _DEFAULT_RUN.min_tokens  # None: the calibrated prediction decides
    truncate: bool = _DEFAULT_RUN.truncate  # cut a document too long for the context instead of refusing

    def run_settings(self, keep: float, positions: str) -> RunSettings:
        # The field names are RunSettings' own, so every preference carries over by name.
        return replace(RunSettings(keep=keep, positions=positions), **asdict(self))


def default_qsettings() -> QSettings:
    return QSettings(ORGANIZATION, APPLICATION)


class SettingsStore:
    def __init__(self, settings: QSettings) -> None:
        self._s = settings

    # --- models ----------------------------------------------------------------------------

    def model_settings(self) -> ModelSettings:
        threads = self._int("models/n_threads", 0)
        return ModelSettings(
            target_path=self._path("models/target_path"),
            draft_path=self._path("models/draft_path"),
            device=self._choice("models/device", ("auto", "cuda", "cpu"), _DEFAULT_MODELS.device),
            n_threads=threads if threads > 0 else None,
            n_ctx=self._int("models/n_ctx", _DEFAULT_MODELS.n_ctx),
            n_batch=self._int("models/n_batch", _DEFAULT_MODELS.n_batch),
            draft_quant=self._choice("models/draft_quant", ("int8", "none"), _DEFAULT_MODELS.draft_quant),
        )

    def save_model_settings(self, settings: ModelSettings) -> None:
        self._s.setValue("models/target_path", str(settings.target_path or ""))
        self._s.setValue("models/draft_path", str(settings.draft_path or ""))
        self._s.setValue("models/device", settings.device)
        self._s.setValue("models/n_threads", settings.n_threads or 0)
        self._s.setValue("models/n_ctx", settings.n_ctx)
        self._s.setValue("models/n_batch", settings.n_batch)
        self._s.setValue("models/draft_quant", settings.draft_quant)
        self._s.sync()

    # --- run preferences -----------------------------------------------------------------------

    def run_preferences(self) -> RunPreferences:
        defaults = RunPreferences()
        return RunPreferences(
            chunk_size=self._int("run/chunk_size", defaults.chunk_size),
            lookahead=self._int("run/lookahead", defaults.lookahead),
            draft_window=max(self._int("run/draft_window", defaults.draft_window), 0),
            max_new_tokens=self._int("run/max_new_tokens", defaults.max_new_tokens),
            min_tokens=self._threshold("run/min_tokens"),
            truncate=self._int("run/truncate", int(defaults.truncate)) == 1,
        )

    def save_run_preferences(self, prefs: RunPreferences) -> None:
        self._s.setValue("run/chunk_size", prefs.chunk_size)
        self._s.setValue("run/lookahead", prefs.lookahead)
        self._s.setValue("run/draft_window", prefs.draft_window)
        self._s.setValue("run/max_new_tokens", prefs.max_new_tokens)
        self._s.setValue("run/min_tokens", AUTOMATIC if prefs.min_tokens is None else prefs.min_tokens)
        self._s.setValue("run/truncate", int(prefs.truncate))
        self._s.sync()

    def keep_percent(self) -> int:
        return min(max(self._int("ui/keep_percent", KEEP_DEFAULT), KEEP_MIN), KEEP_MAX)

    def save_keep_percent(self, percent: int) -> None:
        self._s.setValue("ui/keep_percent", percent)

    def position_mode(self) -> str:
        return self._choice("ui/position_mode", ("auto", "restore", "renumber"), "auto")

    def save_position_mode(self, mode: str) -> None:
        self._s.setValue("ui/position_mode", mode)

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

    # --- typed reads -------------------------------------------------------------------------

    def _int(self, key: str, default: int) -> int:
        try:
            return int(self._s.value(key, default))
        except (TypeError, ValueError):
            return default

    def _threshold(self, key: str) -> int | None:
        """A stored token count, or None (automatic) when it is "auto", missing or unreadable."""
        value = self._int(key, -1)
        return value if value >= 0 else None

    def _path(self, key: str) -> Path | None:
        value = str(self._s.value(key, "") or "").strip()
        return Path(value).expanduser() if value else None

    def _choice(self, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = str(self._s.value(key, default))
        return value if value in allowed else default
