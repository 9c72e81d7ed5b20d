"""The Open Recent menu, rebuilt from the settings store each time it opens."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMenu, QWidget

from desktop.sessions.settings_store import SettingsStore


class RecentMenu(QMenu):
    pathChosen = Signal(str)

    def __init__(self, store: SettingsStore, parent: QWidget | None = None) -> None:
        super().__init__("Open &Recent", parent)
        self._store = store
        self.aboutToShow.connect(self.rebuild)
        self.rebuild()

    def rebuild(self) -> None:
        self.clear()
        paths = self._store.recent_files()
        for path in paths:
            action = self.addAction(path)
            action.triggered.connect(lambda _checked=False, p=path: self.pathChosen.emit(p))
        if not paths:
            self.addAction("No recent documents").setEnabled(False)
            return
        self.addSeparator()
        self.addAction("Clear list").triggered.connect(self._clear)

    def paths(self) -> list[str]:
        return self._store.recent_files()

    def _clear(self) -> None:
        self._store.clear_recent()
        self.rebuild()
