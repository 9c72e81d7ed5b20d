"""Saved prefix states: a document's full prefix, prefilled once, loaded again by a later process.

Each state is two files in the cache (engine.core.paths.state_cache_dir), named by a digest of
its PrefixKey: `<digest>.state`, llama.cpp's sequence state (the prefix's KV entries and its
tokens), and `<digest>.json`, the sidecar: the key, the llama.cpp build, the prefix tokens'
count and hash, the state file's size and hash, when it was made and last used. The state file
is written under a temporary name and renamed, the sidecar last: a state without its sidecar
is never loaded.

Nothing is loaded on trust. Before a load the sidecar must match the key, the build and the
prompt's prefix, and the state file its size and hash; after it, the tokens llama.cpp read back
must be the prefix's exactly. Anything else is discarded with a one-line notice and the prefix
is prefilled as usual. The store keeps at most its cap in bytes, evicting the least recently
used; a cap of 0 turns it off. One lock file serializes the store's users across processes.
A state whose sidecar cannot be read is never loaded: eviction and `cache clear` remove it.

A sidecar may come from elsewhere: it is read only as a small regular file in the folder, each
field of its kind. Paths are made only from file names that are digests (32 hex digits), never
from what a sidecar says, so none can name a file outside the folder; other files are left alone.

The states hold the documents' token IDs, so the folder is 0700 and its files 0600; what an
earlier version left readable to others is tightened when a store first uses its folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from engine.core.atomic import write_text_atomic
from engine.core.errors import CacheError, RuntimeFailure
from engine.core.hashing import sha256_file
from engine.core.locks import artefact_lock
from engine.core.private import PRIVATE_FILE_MODE, private_dir, tighten_files
from engine.llama.native import LlamaContext
from engine.models.untrusted import file_kind, load_json_object
from engine.pipeline.session import PrefixKey

log = logging.getLogger(__name__)

GB = 10**9
STATE_SUFFIX = ".state"
SIDECAR_SUFFIX = ".json"
TEMP_SUFFIX = ".tmp"
DIGEST = re.compile(r"[0-9a-f]{32}")  # key_digest's form: the only names the store's files have
MAX_SIDECAR_BYTES = 16 << 20  # a sidecar is a few hundred bytes and its key's system prompt
# What a failed save or load can raise (a read-only or full cache, llama.cpp failing to write):
# the engine turns these into a notice, never a crash.
STORE_ERRORS: tuple[type[Exception], ...] = (OSError, CacheError, RuntimeFailure)


@cache
def runtime_version() -> str:
    """The llama.cpp build that writes the states: another build may lay out its state files differently."""
    try:
        return f"llama-cpp-python {version('llama_cpp_python')}"
    except PackageNotFoundError:
        return "llama-cpp-python (unknown version)"


def cap_bytes(gigabytes: float) -> int:
    return int(gigabytes * GB)


def key_json(key: PrefixKey) -> dict:
    """The key as its JSON round trip gives it back (tuples become lists), for comparing with a sidecar's."""
    return json.loads(json.dumps(asdict(key)))


def key_digest(key: PrefixKey) -> str:
    return hashlib.sha256(json.dumps(key_json(key), sort_keys=True).encode()).hexdigest()[:32]


def is_digest(name: object) -> bool:
    return isinstance(name, str) and DIGEST.fullmatch(name) is not None


def tokens_sha256(tokens: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(tokens, dtype="<i4").tobytes()).hexdigest()


def _fsync(path: Path) -> None:
    """llama.cpp writes with stdio and never syncs: sync before the rename makes the file final."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class SavedState:
    """A sidecar: what one saved state holds and how to check it."""

    digest: str
    key: dict
    runtime: str
    target_name: str
    prefix_tokens: int
    tokens_sha256: str
    state_bytes: int
    state_sha256: str
    created: float
    last_used: float

    @classmethod
    def from_json(cls, data: object) -> SavedState:
        """Raises ValueError when the sidecar lacks a field, has others, or has one of the wrong kind."""
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) != names:
            raise ValueError("not a saved-state sidecar")
        problem = _field_problem(data)
        if problem:
            raise ValueError(f"not a saved-state sidecar: {problem}")
        return cls(**data)

    @property
    def document_sha256(self) -> str:
        return self.key["document_sha256"]


# Each field a sidecar must have, but its digest and key, with what it must be.
_FIELD_KINDS = {
    "text": (("runtime", "target_name", "tokens_sha256", "state_sha256"), lambda v: isinstance(v, str)),
    "a count": (("prefix_tokens", "state_bytes"), lambda v: type(v) is int and v >= 0),
    "a time": (("created", "last_used"), lambda v: type(v) in (int, float) and math.isfinite(v)),
}


def _field_problem(data: dict) -> str:
    """What is wrong with a sidecar's fields ("" when nothing is)."""
    if not is_digest(data["digest"]):
        return "its digest is not a state's name"
    if not isinstance(data["key"], dict) or not isinstance(data["key"].get("document_sha256"), str):
        return "its key is not a prefix's"
    for kind, (names, fits) in _FIELD_KINDS.items():
        wrong = next((name for name in names if not fits(data[name])), None)
        if wrong:
            return f"its {wrong} is not {kind}"
    return ""


def _reason(error: Exception) -> str:
    return (error.strerror or str(error)) if isinstance(error, OSError) else str(error)


@dataclass(frozen=True)
class StateLoad:
    """What a load gave: the prefix tokens the KV cache now holds (0: none), and why not, if it failed."""

    tokens: int = 0
    notice: str = ""


class StateStore:
    """The saved states in one folder, at most `cap` bytes of them."""

    def __init__(self, folder: Path, cap: int):
        self.folder = Path(folder)
        self.cap = cap
        self._private = False  # the folder and its files have been tightened by this store

    @property
    def enabled(self) -> bool:
        return self.cap > 0

    # -- paths ----------------------------------------------------------------
    def _file(self, digest: str, suffix: str) -> Path:
        """A state's file in the folder; only a digest names one."""
        if not is_digest(digest):
            raise ValueError(f"not a saved state's name: {digest!r}")
        return self.folder / f"{digest}{suffix}"

    def _state(self, digest: str) -> Path:
        return self._file(digest, STATE_SUFFIX)

    def _sidecar(self, digest: str) -> Path:
        return self._file(digest, SIDECAR_SUFFIX)

    def _check_inside(self, path: Path) -> None:
        """Raises ValueError for a file that leads out of the folder (a link to elsewhere): never read."""
        if Path(os.path.realpath(path)).parent != Path(os.path.realpath(self.folder)):
            raise ValueError("it links to a file outside the saved states' folder")

    def _digests(self, suffix: str) -> list[str]:
        """The digests of the folder's files with this suffix; other names are not the store's."""
        names = (path.name[: -len(suffix)] for path in self.folder.glob(f"*{suffix}"))
        return [name for name in names if is_digest(name)]

    @contextmanager
    def _lock(self) -> Iterator[None]:
        with artefact_lock(self.folder / "store"):
            self._make_private_once()
            yield

    def _make_private_once(self) -> None:
        """The folder 0700 and its files 0600, those an earlier version left readable to others too."""
        if self._private or not self.folder.is_dir():
            return
        private_dir(self.folder)
        tighten_files(self.folder)
        self._private = True

    # -- listing ----------------------------------------------------------------
    def entries(self) -> list[SavedState]:
        """The states whose sidecar reads, most recently used first; each other is skipped with a warning."""
        self._make_private_once()
        readable, unreadable = self._scan()
        for digest, why in unreadable:
            log.warning("skipped saved state %s: its sidecar could not be read (%s)", digest, why)
        return sorted(readable, key=lambda e: e.last_used, reverse=True)

    def _scan(self) -> tuple[list[SavedState], list[tuple[str, str]]]:
        """The states whose sidecar reads, and (digest, why) for each whose sidecar does not."""
        readable: list[SavedState] = []
        unreadable: list[tuple[str, str]] = []
        for digest in self._digests(SIDECAR_SUFFIX):
            try:
                readable.append(self._parse_sidecar(digest))
            except FileNotFoundError:
                continue  # removed meanwhile
            except (OSError, ValueError, TypeError) as error:
                unreadable.append((digest, _reason(error)))
        return readable, unreadable

    def _read_sidecar(self, digest: str) -> SavedState | None:
        try:
            return self._parse_sidecar(digest)
        except (OSError, ValueError, TypeError):
            return None

    def _parse_sidecar(self, digest: str) -> SavedState:
        """Raises OSError when it cannot be read, ValueError or TypeError when it is no sidecar
        (engine.models.untrusted.MalformedFile, a ValueError, for one nested too deeply or too large)."""
        sidecar = self._sidecar(digest)
        self._check_inside(sidecar)
        entry = SavedState.from_json(load_json_object(sidecar, MAX_SIDECAR_BYTES))
        return replace(entry, digest=digest)  # a copied sidecar stands for the state under its own name

    # -- saving -------------------------------------------------------------------
    def save(
        self, context: LlamaContext, key: PrefixKey, prefix: np.ndarray, target_name: str
    ) -> SavedState | None:
        """Save sequence 0 of the context (it must hold exactly `prefix`); None when the store is off
        or the state alone is over the cap. Then evict the least recently used beyond the cap."""
        if not self.enabled:
            return None
        digest = key_digest(key)
        with self._lock():
            entry = self._write(context, digest, key, prefix, target_name)
            self._evict(keep=digest)
        return entry

    def _write(
        self, context: LlamaContext, digest: str, key: PrefixKey, prefix: np.ndarray, target_name: str
    ) -> SavedState | None:
        temp = self.folder / f".{digest}{STATE_SUFFIX}.{os.getpid()}{TEMP_SUFFIX}"
        try:
            context.save_sequence(temp, prefix)
            os.chmod(temp, PRIVATE_FILE_MODE)  # llama.cpp creates it as the umask allows
            _fsync(temp)
            size = temp.stat().st_size
            if size > self.cap:
                log.info("the prefix state (%d bytes) is over the saved-state cap: not saved", size)
                return None
            now = time.time()
            entry = SavedState(
                digest,
                key_json(key),
                runtime_version(),
                target_name,
                len(prefix),
                tokens_sha256(prefix),
                size,
                sha256_file(temp),
                now,
                now,
            )
            self._sidecar(digest).unlink(missing_ok=True)  # an old sidecar must never describe the new state
            os.replace(temp, self._state(digest))
            self._write_sidecar(entry)
            return entry
        finally:
            temp.unlink(missing_ok=True)

    def _write_sidecar(self, entry: SavedState) -> None:
        write_text_atomic(
            self._sidecar(entry.digest), json.dumps(asdict(entry), indent=1), new_file_mode=PRIVATE_FILE_MODE
        )

    def _evict(self, keep: str) -> None:
        """Drop states without a sidecar or with one that cannot be read, then the least recently used
        until the rest fit the cap."""
        self._remove_orphans()
        readable, unreadable = self._scan()
        self._remove_unreadable(unreadable)
        entries = sorted(readable, key=lambda e: e.last_used)
        total = sum(e.state_bytes for e in entries)
        for entry in entries:
            if total <= self.cap:
                break
            if entry.digest != keep:
                log.info("evicting the saved state of document %s", entry.document_sha256[:12])
                self._discard(entry.digest)
                total -= entry.state_bytes

    def _remove_orphans(self) -> None:
        """Files a killed save left: temporaries, and states whose sidecar was never written."""
        for path in self.folder.glob(f".*{TEMP_SUFFIX}"):
            path.unlink(missing_ok=True)
        for digest in self._digests(STATE_SUFFIX):
            if not self._sidecar(digest).exists():
                self._state(digest).unlink(missing_ok=True)

    def _remove_unreadable(self, unreadable: list[tuple[str, str]]) -> tuple[int, int]:
        """Remove the states whose sidecar cannot be read (they are never loaded), with a warning
        each; returns the states removed and the bytes freed. Under the lock: no sidecar is
        half-written then."""
        removed = freed = 0
        for digest, why in unreadable:
            size = self._state_bytes(digest)
            if self._discard(digest):
                removed, freed = removed + 1, freed + size
                log.warning("removed saved state %s: its sidecar could not be read (%s)", digest, why)
        return removed, freed

    def _state_bytes(self, digest: str) -> int:
        try:
            return self._state(digest).stat().st_size
        except OSError:
            return 0

    def _discard(self, digest: str) -> bool:
        """Remove a state's files, the sidecar first (a state without it is never loaded); a link is
        removed, never followed. False when one is a folder: that is left, with a warning."""
        for path in (self._sidecar(digest), self._state(digest)):
            if path.is_dir() and not path.is_symlink():
                log.warning(
                    "left %s in the saved states' folder: it is a folder, not a state's file", path.name
                )
                return False
            path.unlink(missing_ok=True)
        return True

    # -- loading ------------------------------------------------------------------
    def has(self, key: PrefixKey) -> bool:
        """A state is saved under this key (not yet checked: load checks it)."""
        return self.enabled and self._sidecar(key_digest(key)).exists()

    def load(self, context: LlamaContext, key: PrefixKey, prefix: np.ndarray) -> StateLoad:
        """Load the state saved for this key into the (cleared) context, checked before and after.

        No saved state: StateLoad(0, ""). A damaged or mismatched one: discarded, the context
        left empty, and a notice saying why."""
        if not self.has(key):
            return StateLoad()
        digest = key_digest(key)
        with self._lock():
            entry = self._read_sidecar(digest)
            problem = self._problem(entry, key, prefix)
            if not problem:
                problem = self._load_checked(context, digest, prefix)
            if problem:
                self._discard(digest)
                return StateLoad(notice=f"saved state not used: {problem}; prefilling the document instead")
            self._touch(entry)
        return StateLoad(tokens=len(prefix))

    def _problem(self, entry: SavedState | None, key: PrefixKey, prefix: np.ndarray) -> str:
        """Why this state must not be loaded for this key and prefix ("" when it may)."""
        if entry is None:
            return "its description could not be read"
        if entry.key != key_json(key):
            return "it was saved for another document, model or system prompt"
        if entry.runtime != runtime_version():
            return f"it was saved by {entry.runtime}, not {runtime_version()}"
        if entry.prefix_tokens != len(prefix) or entry.tokens_sha256 != tokens_sha256(prefix):
            return "its tokens differ from this prompt's"
        return self._state_file_problem(entry)

    def _state_file_problem(self, entry: SavedState) -> str:
        """Why the state file must not be loaded ("" when it may): checked before a byte of it is read."""
        state = self._state(entry.digest)
        try:
            self._check_inside(state)
            st = state.stat()
            if not stat.S_ISREG(st.st_mode):
                return f"its file is not a regular file ({file_kind(st.st_mode)})"
            if st.st_size != entry.state_bytes:
                return f"its file is {st.st_size} bytes, {entry.state_bytes} were saved"
            if sha256_file(state) != entry.state_sha256:
                return "its file is damaged (hash mismatch)"
        except OSError as error:
            return f"its file cannot be read ({error.strerror or error})"
        except ValueError as error:
            return str(error)
        return ""

    def _load_checked(self, context: LlamaContext, digest: str, prefix: np.ndarray) -> str:
        """Load the state; on failure, or tokens that are not the prefix's, empty the context and say why."""
        try:
            tokens = context.load_sequence(self._state(digest), context.n_ctx)
        except RuntimeFailure:
            return "llama.cpp could not read it"
        if not np.array_equal(tokens, prefix):
            context.clear()
            return "the tokens it holds differ from this prompt's"
        return ""

    def _touch(self, entry: SavedState) -> None:
        """Record the use, for least-recently-used eviction (a read-only cache just keeps the old time)."""
        try:
            self._write_sidecar(replace(entry, last_used=time.time()))
        except OSError as error:
            log.info("could not record the saved state's use: %s", error)

    # -- clearing -----------------------------------------------------------------
    def clear(self, document_sha256: str | None = None) -> tuple[int, int]:
        """Remove every saved state, or one document's (whatever its models and prompt); returns
        (states removed, bytes freed)."""
        if not self.folder.exists():
            return 0, 0
        with self._lock():
            readable, unreadable = self._scan()
            chosen = [e for e in readable if document_sha256 in (None, e.document_sha256)]
            removed = [e for e in chosen if self._discard(e.digest)]
            count, freed = len(removed), sum(e.state_bytes for e in removed)
            if document_sha256 is None:  # whose document an unreadable state held is unknown
                more, more_freed = self._remove_unreadable(unreadable)
                self._remove_orphans()
                count, freed = count + more, freed + more_freed
        return count, freed
