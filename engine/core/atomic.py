"""Write a file so that readers see the old contents or the new, never a half-written file.

The data goes to a temporary file in the same folder (so os.replace is a rename on one
file system), is flushed to disk, then replaces the target in one step. If anything
fails before the replace, the previous file is untouched and the temporary is removed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o666  # before the umask, as open() would create it (mkstemp creates 0600)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes, new_file_mode: int | None = None) -> None:
    """new_file_mode: a new file's mode, instead of what the umask allows (an existing file keeps its own)."""
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, _mode_for(target, new_file_mode))
        os.replace(tmp_name, target)
    except BaseException:
        _remove_quietly(tmp_name)
        raise


def write_text_atomic(
    path: str | os.PathLike[str], text: str, encoding: str = "utf-8", new_file_mode: int | None = None
) -> None:
    write_bytes_atomic(path, text.encode(encoding), new_file_mode)


def _mode_for(target: Path, new_file_mode: int | None) -> int:
    """Keep an existing file's permissions; a new file gets what the umask allows, as open() gives."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        return NEW_FILE_MODE & ~current_umask() if new_file_mode is None else new_file_mode


def current_umask() -> int:
    """The process's umask, read without changing it where the system lets us (Linux shows it in
    /proc); setting it to read it back is process-wide, so another thread could create a file meanwhile."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _umask_by_setting_it()


def _umask_by_setting_it() -> int:
    umask = os.umask(0o077)  # the strictest value while it is out: a file made meanwhile is private
    os.umask(umask)
    return umask


def _remove_quietly(name: str) -> None:
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass
