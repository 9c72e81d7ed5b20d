"""Plain-text ingestion: .txt, .md, .rst and other text files."""

from __future__ import annotations

from pathlib import Path

from engine.core.cancel import CancelToken
from engine.core.errors import IngestError
from engine.ingest._common import Progress, clean_text, decode_bytes, human_bytes, token
from engine.ingest.document import Document
from engine.ingest.sections import text_sections

DEFAULT_MAX_BYTES = 32 * 1024 * 1024


def load_text(
    path: Path,
    *,
    cancel: CancelToken | None = None,
    progress: Progress | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Document:
    """Read one text file: one segment per section (by its headings), else one for the whole file."""
    cancel = token(cancel)
    path = Path(path)
    cancel.raise_if_cancelled()
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except PermissionError as e:
        raise IngestError(f"cannot read {path}: permission denied") from e
    except OSError as e:
        raise IngestError(f"cannot read {path}: {e.strerror or e}") from e

    warnings: list[str] = []
    truncated = len(data) > max_bytes
    if truncated:
        data = data[:max_bytes]
        warnings.append(f"only the first {human_bytes(max_bytes)} of the file were read (size cap)")
    text, clean = decode_bytes(data, truncated=truncated)
    if not clean:
        warnings.append("the file is not valid UTF-8; undecodable bytes were replaced with \ufffd")
    text = clean_text(text)
    if not text.strip():
        raise IngestError(f"{path} is empty (no text to analyze)")
    if progress is not None:
        progress(1, 1, path.name)
    return Document(
        path=path,
        kind="text",
        text=text,
        segments=text_sections(text, path.name, cancel),
        warnings=warnings,
    )
