"""SHA-256 of a file, read in blocks: the default models, saved prefix states and sample archives
are checked against the hashes recorded for them. And a cheap id of a file's version (its path,
size and modification time), for what is derived from a file and kept until the file changes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.core.cancel import NEVER, CancelToken

HASH_BLOCK = 8 << 20


def sha256_file(path: Path, cancel: CancelToken = NEVER) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(HASH_BLOCK):
            cancel.raise_if_cancelled()
            digest.update(block)
    return digest.hexdigest()


def file_version_id(path: Path) -> str:
    """16 hex digits naming this version of the file: its resolved path, size and mtime, not its bytes."""
    st = path.stat()
    return hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
