"""SHA-256 of a file, read in blocks: the default models, saved prefix states and sample archives
are checked against the hashes recorded for them."""

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
