"""Making an artefact in the cache (a model, the dequantized draft) safely across processes.

Two app instances on a fresh cache would both make the same artefact, and the second one's
rename would fail. A lock file per artefact makes the second wait; it then finds the first
one's result and reuses it. Whoever holds the lock may also remove the artefact's leftover
partial folders: nobody else can be writing them. A cache that cannot be written ends in one
CacheError that names the folder, not in a raw OSError.
"""

from __future__ import annotations

import errno
import glob
import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import CacheError, Cancelled
from engine.core.private import PRIVATE_FILE_MODE, private_dir

log = logging.getLogger(__name__)

LOCK_SUFFIX = ".lock"
POLL_S = 0.2  # a waiter notices Cancel within this


_REASONS = {
    errno.EROFS: "it is read-only",
    errno.EACCES: "it is read-only",
    errno.EPERM: "it is read-only",
    errno.ENOSPC: "it is full",
    errno.EDQUOT: "it is full",
}


class LockHeld(Exception):
    """Another process holds the artefact's lock, and the caller asked not to wait for it."""


def _cache_error_message(folder: Path, error: OSError) -> str:
    reason = _REASONS.get(error.errno) or f"is it read-only or full? ({error.strerror or error})"
    return f"cannot write to the cache folder {folder}: {reason}"


@contextmanager
def cache_writes(folder: Path) -> Iterator[None]:
    """Turn an OSError raised while writing into the cache folder into a one-line CacheError."""
    try:
        yield
    except OSError as error:
        raise CacheError(_cache_error_message(folder, error)) from error


def _lock_path(artefact: Path) -> Path:
    return artefact.with_name(artefact.name + LOCK_SUFFIX)


@contextmanager
def artefact_lock(artefact: Path, cancel: CancelToken = NEVER, wait: bool = True) -> Iterator[None]:
    """Hold the artefact's lock file while making it; another process waits here (Cancel ends the wait),
    or, with wait=False, LockHeld is raised at once.

    The lock file stays after release: removing it would let a waiter hold a lock on a file
    the next process no longer sees. Its folder, when in the cache, is the user's alone.
    """
    lock = FileLock(str(_lock_path(artefact)), mode=PRIVATE_FILE_MODE)
    with cache_writes(artefact.parent):
        private_dir(artefact.parent)
        if wait:
            _acquire(lock, artefact, cancel)
        else:
            _acquire_now(lock, artefact)
    try:
        yield
    finally:
        lock.release()


def _acquire(lock: FileLock, artefact: Path, cancel: CancelToken) -> None:
    try:
        lock.acquire(blocking=False)
        return
    except Timeout:
        log.info("another instance is making %s: waiting for it", artefact.name)
    try:
        lock.acquire(poll_interval=POLL_S, cancel_check=lambda: cancel.cancelled)
    except Timeout as exc:  # no timeout is set, so only Cancel ends the wait
        raise Cancelled() from exc


def _acquire_now(lock: FileLock, artefact: Path) -> None:
    try:
        lock.acquire(blocking=False)
    except Timeout as exc:
        raise LockHeld(f"another process holds the lock of {artefact}") from exc


def remove_partials(folder: Path, prefix: str) -> None:
    """Remove what killed saves left (folders named prefix*). Only while holding the artefact's lock."""
    for partial in folder.glob(glob.escape(prefix) + "*"):
        log.info("removing %s, left by an interrupted save", partial)
        shutil.rmtree(partial, ignore_errors=True)
