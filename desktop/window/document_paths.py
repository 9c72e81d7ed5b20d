"""Which paths the user can open, from a dialog or a drop. The engine decides if it can read them."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData

OPEN_FILE_FILTER = "Documents (*.pdf *.txt *.md *.markdown *.rst);;All files (*)"


def dropped_paths(mime: QMimeData) -> list[str]:
    """Local files and folders in a drag's data, in order; remote URLs are ignored."""
    if not mime.hasUrls():
        return []
    paths = []
    for url in mime.urls():
        if url.isLocalFile():
            local = url.toLocalFile()
            if Path(local).exists():
                paths.append(local)
    return paths
