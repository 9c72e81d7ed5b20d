"""Folders and files only their owner may read: a saved state holds a document's token IDs.

The cache root (engine.core.paths.cache_dir) and every folder below it are 0700, and the
saved-state files 0600. What an earlier version left world-readable is tightened when this
process first uses the cache. Only our own folders are changed, the cache root and below: the
user's home and ~/.cache keep their modes. Tightening is best effort: on a read-only disk the
modes stay, and the write that follows names the disk.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

from engine.core.paths import cache_dir

log = logging.getLogger(__name__)

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
GROUP_AND_OTHER = 0o077

_tightened_roots: set[str] = set()
_tightening = threading.Lock()


def private_dir(path: str | os.PathLike[str]) -> Path:
    """The folder, made if missing. In the cache it is made 0700, and it and the folders between the
    cache root and it lose group and other access; a folder outside the cache is the user's (a
    report's, say): made as usual and left as it is. Raises OSError when it cannot be made."""
    path = Path(path)
    ours = _cache_folders_down_to(path)
    if not ours:
        _make_as_usual(path)
        return path
    _make_as_usual(ours[0].parent)  # ~/.cache and above: the user's
    for folder in ours:
        _make_private(folder)
    _tighten_cache_once(ours[0])
    return path


def tighten_files(folder: str | os.PathLike[str], pattern: str = "*") -> None:
    """Take group and other access off the files in `folder` that match `pattern`."""
    for path in Path(folder).glob(pattern):
        if path.is_file() and not path.is_symlink():
            _take_away_group_and_other(path)


def _cache_folders_down_to(path: Path) -> list[Path]:
    """The folders from the cache root down to `path`; none when `path` is not in the cache."""
    target = Path(os.path.abspath(path))
    root = Path(os.path.abspath(cache_dir()))
    if target != root and root not in target.parents:
        return []
    folders = [root]
    for part in target.relative_to(root).parts:
        folders.append(folders[-1] / part)
    return folders


def _make_as_usual(folder: Path) -> None:
    if not folder.is_dir():  # an existing folder is never made again: on a read-only disk that would fail
        folder.mkdir(parents=True, exist_ok=True)


def _make_private(folder: Path) -> None:
    """Made 0700, or tightened; through a symlink (a cache moved to another disk), its target is."""
    if folder.is_dir():
        _take_away_group_and_other(folder, follow_symlinks=True)
        return
    try:
        folder.mkdir(mode=PRIVATE_DIR_MODE)
    except FileExistsError:
        _take_away_group_and_other(folder, follow_symlinks=True)  # another process made it meanwhile


def _tighten_cache_once(root: Path) -> None:
    """Every folder an earlier version left under the cache root, the first time this process uses it."""
    with _tightening:
        if str(root) in _tightened_roots:
            return
        _tightened_roots.add(str(root))
    for folder, subfolders, _files in os.walk(
        root
    ):  # symlinks are not followed: what they point at is not ours
        for name in subfolders:
            _take_away_group_and_other(Path(folder) / name)


def _take_away_group_and_other(path: Path, follow_symlinks: bool = False) -> None:
    """The owner's bits stay as they are: a read-only folder stays read-only."""
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
        if stat.S_ISLNK(st.st_mode) or not st.st_mode & GROUP_AND_OTHER:
            return
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~GROUP_AND_OTHER)
    except OSError as error:
        log.debug("could not make %s private: %s", path, error)
