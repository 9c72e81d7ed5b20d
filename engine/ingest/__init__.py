"""Document ingestion: a PDF, a text file or a code folder becomes a Document.

    load_document(path, password=None, cancel=None, progress=None, limits=None)

`progress` is called as progress(done, total, label). `limits` is an
IngestLimits (or, for a folder, a FolderLimits). Every failure a user can act
on is an IngestError with a one-line message that names the path; a cancel
raises engine.core.errors.Cancelled.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.core.cancel import CancelToken
from engine.core.errors import IngestError
from engine.ingest._common import (
    PDF_MAGIC,
    SNIFF_BYTES,
    FolderLimits,
    IngestLimits,
    Progress,
    has_binary_extension,
    looks_binary,
)
from engine.ingest.document import Document, Segment
from engine.ingest.folder import load_folder
from engine.ingest.pdf import load_pdf
from engine.ingest.text import load_text

__all__ = [
    "Document",
    "FolderLimits",
    "IngestLimits",
    "Progress",
    "Segment",
    "TEXT_EXTENSIONS",
    "load_document",
]

TEXT_EXTENSIONS = frozenset({".txt", ".md", ".markdown", ".rst", ".text", ".adoc", ".org"})


def load_document(
    path: str | os.PathLike[str],
    *,
    password: str | None = None,
    cancel: CancelToken | None = None,
    progress: Progress | None = None,
    limits: IngestLimits | FolderLimits | None = None,
) -> Document:
    """Read a PDF, a text file or a code folder into a Document."""
    p = Path(path).expanduser()
    if isinstance(limits, FolderLimits):
        limits = IngestLimits(folder=limits)
    limits = limits or IngestLimits()

    try:
        st = p.stat()
    except FileNotFoundError as e:
        raise IngestError(f"no such file or folder: {p}") from e
    except PermissionError as e:
        raise IngestError(f"cannot open {p}: permission denied") from e
    except OSError as e:
        raise IngestError(f"cannot open {p}: {e.strerror or e}") from e

    if stat.S_ISDIR(st.st_mode):
        if not os.access(p, os.R_OK | os.X_OK):
            raise IngestError(f"cannot read {p}: permission denied")
        return load_folder(p, cancel=cancel, progress=progress, limits=limits.folder)

    if not stat.S_ISREG(st.st_mode):
        raise IngestError(f"{p} is not a regular file or folder")
    if not os.access(p, os.R_OK):
        raise IngestError(f"cannot read {p}: permission denied")

    suffix = p.suffix.lower()
    head = _head(p)
    if suffix == ".pdf" or head.startswith(PDF_MAGIC):
        return load_pdf(p, password=password, cancel=cancel, progress=progress, limits=limits)
    if suffix in TEXT_EXTENSIONS or (not has_binary_extension(p.name) and not looks_binary(head)):
        return load_text(p, cancel=cancel, progress=progress, max_bytes=limits.max_text_bytes)
    kind = f"'{suffix}' files" if suffix else "binary files"
    raise IngestError(
        f"unsupported file: {p} ({kind} cannot be read; use a PDF, a text file or a code folder)"
    )


def _head(p: Path) -> bytes:
    try:
        with open(p, "rb") as fh:
            return fh.read(SNIFF_BYTES)
    except PermissionError as e:
        raise IngestError(f"cannot read {p}: permission denied") from e
    except OSError as e:
        raise IngestError(f"cannot read {p}: {e.strerror or e}") from e
