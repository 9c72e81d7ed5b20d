"""Write a file so that readers see the old contents or the new, never a half-written file.

The data goes to a temporary file in the same folder (so os.replace is a rename on one
file system), is flushed to disk, then replaces the target in one step. If anything
fails before the replace, the previous file is untouched and the temporary is removed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o644  # mkstemp creates 0600; a report should be readable like any other file


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, _mode_for(target))
        os.replace(tmp_name, target)
    except BaseException:
        _remove_quietly(tmp_name)
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    write_bytes_atomic(path, text.encode(encoding))


def _mode_for(target: Path) -> int:
    """Keep an existing file's permissions; new files get the usual 0644."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        return NEW_FILE_MODE


def _remove_quietly(name: str) -> None:
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass
