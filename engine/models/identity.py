"""A model file's content identity, cheap enough to take at every load: what keys its saved states.

The path and size alone would let an updated model of the same size reuse the states of the old
one. Hashing a whole 1 GB GGUF each start is too slow, so the identity hashes the size, the
head (the GGUF header: metadata, the tensors' names, shapes and offsets, and the first tensors),
the tail (the last tensors) and evenly spaced samples between (the tensors in the middle): a
few MiB read, a few ms from the page cache. Memoized per (path, size, mtime, inode): a file
changed in place or replaced by another is read again.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

HEAD_BYTES = 4 << 20
TAIL_BYTES = 1 << 20
SAMPLES = 64
SAMPLE_BYTES = 16 << 10


def content_identity(path: str | os.PathLike[str]) -> str:
    """A SHA-256 over the file's size, head, samples and tail; raises OSError when it cannot be read."""
    st = os.stat(path)
    return _identity(os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)


@lru_cache(maxsize=64)
def _identity(path: str, size: int, mtime_ns: int, inode: int) -> str:
    digest = hashlib.sha256(str(size).encode())
    with Path(path).open("rb") as fh:
        for offset, length in _spans(size):
            fh.seek(offset)
            digest.update(fh.read(length))
    return digest.hexdigest()


def _spans(size: int) -> list[tuple[int, int]]:
    """(offset, length) to read: all of a small file; else the head, the samples, the tail."""
    if size <= HEAD_BYTES + TAIL_BYTES + SAMPLES * SAMPLE_BYTES:
        return [(0, size)]
    middle_start, middle_end = HEAD_BYTES, size - TAIL_BYTES
    step = (middle_end - middle_start) // SAMPLES
    samples = [(middle_start + i * step, SAMPLE_BYTES) for i in range(SAMPLES)]
    return [(0, HEAD_BYTES), *samples, (middle_end, TAIL_BYTES)]
