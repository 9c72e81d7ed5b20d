"""PDF ingestion with pypdf: text page by page, with a page map."""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

from engine.cancel import CancelToken
from engine.errors import IngestError
from engine.ingest._common import Progress, clean_text, page_ranges, token
from engine.ingest.document import Document, Segment

PAGE_SEPARATOR = "\n\n"
DEFAULT_MAX_PAGES = 2000

# Typographic ligatures that PDF fonts emit as one glyph; tokenizers and search
# want the plain letters. The soft hyphen is dropped.
_LIGATURES = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
     "\ufb05": "st", "\ufb06": "st", "\u00ad": ""}
)  # fmt: skip

_OBJ = re.compile(rb"(\d{1,10})\s+(\d{1,5})\s+obj\b")
_CATALOG = re.compile(rb"/Type\s*/Catalog\b")


class _CountWarnings(logging.Handler):
    """Counts what pypdf logs while it reads a damaged file."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def load_pdf(
    path: Path,
    *,
    password: str | None = None,
    cancel: CancelToken | None = None,
    progress: Progress | None = None,
    max_pages: int = DEFAULT_MAX_PAGES,
) -> Document:
    """Read a PDF's text. Raises IngestError when nothing usable can be read."""
    cancel = token(cancel)
    path = Path(path)
    try:
        data = path.read_bytes()
    except PermissionError as e:
        raise IngestError(f"cannot read {path}: permission denied") from e
    except OSError as e:
        raise IngestError(f"cannot read {path}: {e.strerror or e}") from e
    if not data.strip():
        raise IngestError(f"{path} is not a readable PDF (the file is empty)")

    counter = _CountWarnings()
    pypdf_logger = logging.getLogger("pypdf")
    pypdf_logger.addHandler(counter)
    propagate, pypdf_logger.propagate = pypdf_logger.propagate, False  # counted into one warning, not printed
    try:
        return _read(path, data, password, cancel, progress, max_pages, counter)
    finally:
        pypdf_logger.removeHandler(counter)
        pypdf_logger.propagate = propagate


def _read(path, data, password, cancel, progress, max_pages, counter) -> Document:
    from pypdf.errors import DependencyError

    reader, n_pages, recovered = _open(path, data, password)

    n_read = min(n_pages, max(1, max_pages))
    parts: list[str] = []
    segments: list[Segment] = []
    empty: list[int] = []
    failed: list[int] = []
    pos = 0
    for i in range(n_read):
        cancel.raise_if_cancelled()
        number = i + 1
        try:
            raw = reader.pages[i].extract_text()
        except DependencyError as e:
            raise IngestError(f"{path} needs a feature this install lacks ({_why(e)})") from e
        except Exception:  # a damaged page: keep the others
            failed.append(number)
            raw = None
        if raw is not None:
            text = clean_text(raw).translate(_LIGATURES).strip()
            if text:
                if parts:
                    parts.append(PAGE_SEPARATOR)
                    pos += len(PAGE_SEPARATOR)
                parts.append(text)
                segments.append(Segment(f"page {number}", "page", pos, pos + len(text)))
                pos += len(text)
            else:
                empty.append(number)
        if progress is not None:
            progress(number, n_read, f"page {number}")

    if not segments:
        if recovered or (failed and len(failed) == n_read):
            raise IngestError(f"{path} is not a readable PDF (no page could be read)")
        raise IngestError(
            f"{path} has no extractable text (probably a scanned document); "
            "OCR is not part of this app"
        )

    warnings: list[str] = []
    if recovered:
        warnings.append("the PDF is damaged (cut short?); only what could be recovered was read")
    if n_read < n_pages:
        warnings.append(f"only the first {n_read} of {n_pages} pages were read (page cap {max_pages})")
    if failed:
        warnings.append(f"pages that could not be read: {page_ranges(failed)}")
    if empty:
        warnings.append(f"pages with no text: {page_ranges(empty)}")
    if counter.count and not recovered:
        warnings.append(f"pypdf reported {counter.count} problem(s) in the file; some text may be missing")
    return Document(path=path, kind="pdf", text="".join(parts), segments=segments, warnings=warnings)


def _open(path: Path, data: bytes, password: str | None):
    """A reader with its page count, trying a repair when the file is cut short.

    Returns (reader, n_pages, recovered)."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            _decrypt(reader, path, password)
        return reader, _page_count(path, reader), False
    except IngestError:
        raise
    except Exception as e:  # pypdf raises many kinds on garbage input
        first = e

    repaired = _repair(data)
    if repaired is not None:
        try:
            reader = PdfReader(io.BytesIO(repaired), strict=False)
            if reader.is_encrypted:
                _decrypt(reader, path, password)
            n = _page_count(path, reader)
            return reader, n, True
        except IngestError:
            raise
        except Exception:
            pass
    raise IngestError(f"{path} is not a readable PDF ({_why(first)})") from first


def _page_count(path: Path, reader) -> int:
    from pypdf.errors import DependencyError

    try:
        n = len(reader.pages)
    except DependencyError as e:
        raise IngestError(f"{path} needs a feature this install lacks ({_why(e)})") from e
    if n == 0:
        raise IngestError(f"{path} is not a readable PDF (it has no pages)")
    return n


def _repair(data: bytes) -> bytes | None:
    """For a PDF cut short: keep the whole objects and add a trailer that points at
    the catalog, so pypdf can rebuild the cross-reference table by scanning.
    None when the bytes do not look like a PDF with a catalog."""
    if b"%PDF-" not in data[:1024]:
        return None
    end = data.rfind(b"endobj")
    if end < 0:
        return None
    body = data[: end + len(b"endobj")]
    root = None
    for m in _OBJ.finditer(body):
        stop = body.find(b"endobj", m.end(), m.end() + 65536)
        window = body[m.end() : stop if stop >= 0 else m.end() + 4096]
        if b"stream" not in window[:4096] and _CATALOG.search(window):
            root = m.group(1) + b" " + m.group(2)
            break
    if root is None:
        return None
    return body + b"\ntrailer\n<< /Root " + root + b" R >>\nstartxref\n0\n%%EOF\n"


def _decrypt(reader, path: Path, password: str | None) -> None:
    from pypdf import PasswordType
    from pypdf.errors import DependencyError

    try:
        result = reader.decrypt(password if password is not None else "")
    except DependencyError as e:
        raise IngestError(
            f"{path} is encrypted with a method this install cannot open ({_why(e)})"
        ) from e
    except Exception as e:
        raise IngestError(f"{path} is encrypted and could not be decrypted ({_why(e)})") from e
    if result == PasswordType.NOT_DECRYPTED:
        if password:
            raise IngestError(f"{path} is encrypted and the password is wrong")
        raise IngestError(f"{path} is encrypted; a password is needed to open it")


def _why(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    if len(msg) > 160:
        msg = msg[:157] + "..."
    return f"{e.__class__.__name__}: {msg}" if msg else e.__class__.__name__
