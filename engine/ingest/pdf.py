"""PDF ingestion with pypdf: text page by page, with a page map.

The extracted text is cleaned of typesetting artifacts (glyph-name escapes, ligatures,
line-end hyphenation) by engine.ingest.pdf_text.

Memory stays bounded whatever the file: pypdf reads the file lazily (only a damaged file
is read whole, up to a cap, to repair it), a compressed stream may inflate only so far,
each page's decoded content is dropped once its text is out, and reading stops at a
page cap and a text cap, with a warning that says so.
"""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from pypdf import PasswordType, PdfReader, apply_configuration
from pypdf.errors import DependencyError, LimitReachedError

from engine.core.cancel import CancelToken
from engine.core.errors import IngestError, PasswordError
from engine.ingest._common import (
    PDF_MAGIC,
    SNIFF_BYTES,
    IngestLimits,
    Progress,
    human_bytes,
    page_ranges,
    token,
)
from engine.ingest.document import Document, Segment
from engine.ingest.pdf_text import join_line_end_hyphens, normalise_page_text

PAGE_SEPARATOR = "\n\n"
HEADER_WINDOW = 1024  # readers accept junk before the header, up to a KB
TAIL_WINDOW = 1 << 20  # the end marker must sit in the last MB

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
    limits: IngestLimits | None = None,
) -> Document:
    """Read a PDF's text. Raises IngestError when nothing usable can be read."""
    cancel = token(cancel)
    limits = limits or IngestLimits()
    path = Path(path)
    with _open_binary(path) as fh, _counted_pypdf_warnings() as counter, _stream_caps(limits):
        if _is_blank(fh):
            raise IngestError(f"{path} is not a readable PDF (the file is empty)")
        reader, n_pages, recovered = _open(path, fh, password, limits)
        structure_complaints = counter.count
        pages = _extract_pages(path, reader, n_pages, cancel, progress, limits, counter)
    if not pages.kept:
        raise IngestError(_nothing_read(path, pages, recovered, limits))
    warnings = _warnings(pages, n_pages, recovered, structure_complaints, limits)
    text, segments = _assemble(pages.kept)
    return Document(path=path, kind="pdf", text=text, segments=segments, warnings=warnings)


@contextmanager
def _open_binary(path: Path) -> Iterator[BinaryIO]:
    try:
        fh = open(path, "rb")
    except PermissionError as e:
        raise IngestError(f"cannot read {path}: permission denied") from e
    except OSError as e:
        raise IngestError(f"cannot read {path}: {e.strerror or e}") from e
    with fh:
        yield fh


def _is_blank(fh: BinaryIO) -> bool:
    head = fh.read(SNIFF_BYTES)
    fh.seek(0)
    return len(head) < SNIFF_BYTES and not head.strip()


@contextmanager
def _counted_pypdf_warnings() -> Iterator[_CountWarnings]:
    """pypdf's complaints about a damaged file are counted into one warning, not printed."""
    counter = _CountWarnings()
    pypdf_logger = logging.getLogger("pypdf")
    pypdf_logger.addHandler(counter)
    propagate, pypdf_logger.propagate = pypdf_logger.propagate, False
    try:
        yield counter
    finally:
        pypdf_logger.removeHandler(counter)
        pypdf_logger.propagate = propagate


@contextmanager
def _stream_caps(limits: IngestLimits) -> Iterator[None]:
    """pypdf's decompression limits for this thread's reading only (a context variable)."""
    cap = limits.max_pdf_stream_bytes
    with apply_configuration(
        zlib_maximum_output_length=cap,
        lzw_maximum_output_length=cap,
        run_length_maximum_output_length=cap,
        brotli_maximum_output_length=cap,
        array_based_stream_maximum_output_length=cap,
        stream_decoding_work_maximum_length=4 * cap,
    ):
        yield


@dataclass
class _Pages:
    """The text read so far, page by page, and which pages went wrong how."""

    kept: list[tuple[int, str]] = field(default_factory=list)  # (page number, its text), pages with text
    empty: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    damaged: list[int] = field(default_factory=list)  # read, but pypdf complained: text may be missing
    bombs: list[int] = field(default_factory=list)  # a stream would inflate past the cap
    n_read: int = 0
    text_capped: bool = False
    pos: int = 0  # characters kept so far, separators included

    def add(self, number: int, text: str, max_chars: int) -> None:
        if not text:
            self.empty.append(number)
            return
        sep = len(PAGE_SEPARATOR) if self.kept else 0
        room = max_chars - self.pos - sep
        if len(text) > room:
            self.text_capped = True
            text = text[: max(room, 0)]
            if not text:
                return
        self.kept.append((number, text))
        self.pos += sep + len(text)


def _assemble(kept: list[tuple[int, str]]) -> tuple[str, list[Segment]]:
    """The document's text, pages joined by PAGE_SEPARATOR, and a segment per page.
    Line-end hyphens are resolved here, against the words of every page read; that only
    shortens text, so the text cap still holds."""
    texts = join_line_end_hyphens([text for _, text in kept])
    parts: list[str] = []
    segments: list[Segment] = []
    pos = 0
    for (number, _), text in zip(kept, texts):
        if parts:
            parts.append(PAGE_SEPARATOR)
            pos += len(PAGE_SEPARATOR)
        parts.append(text)
        segments.append(Segment(f"page {number}", "page", pos, pos + len(text)))
        pos += len(text)
    return "".join(parts), segments


def _extract_pages(
    path: Path,
    reader,
    n_pages: int,
    cancel: CancelToken,
    progress: Progress | None,
    limits: IngestLimits,
    counter: _CountWarnings,
) -> _Pages:
    pages = _Pages()
    n_read = min(n_pages, max(1, limits.max_pdf_pages))
    for i in range(n_read):
        cancel.raise_if_cancelled()
        number = i + 1
        complaints = counter.count
        try:
            page = reader.pages[i]
            pages.add(number, normalise_page_text(page.extract_text()).strip(), limits.max_text_bytes)
            _forget_decoded(page)
        except DependencyError as e:
            raise IngestError(f"{path} needs a feature this install lacks ({_why(e)})") from e
        except LimitReachedError:
            pages.bombs.append(number)
        except Exception:  # a damaged page: keep the others
            pages.failed.append(number)
        else:
            if counter.count > complaints:
                pages.damaged.append(number)
        pages.n_read = number
        if progress is not None:
            progress(number, n_read, f"page {number}")
        if pages.text_capped:
            break
    return pages


def _forget_decoded(page) -> None:
    """pypdf caches every decoded content stream; drop this page's so a long PDF reads in flat memory.
    Best effort: the page's text is already out, so a damaged reference here changes nothing."""
    try:
        contents = page.get("/Contents")
        contents = contents.get_object() if contents is not None else None
        for ref in contents if isinstance(contents, list) else [contents]:
            stream = ref.get_object() if ref is not None else None
            if getattr(stream, "decoded_self", None) is not None:
                stream.decoded_self = None
    except Exception:
        pass


def _nothing_read(path: Path, pages: _Pages, recovered: bool, limits: IngestLimits) -> str:
    if pages.bombs:
        return (
            f"{path} is not readable: a compressed stream inflates past the "
            f"{human_bytes(limits.max_pdf_stream_bytes)} cap (a decompression bomb?) on page(s) "
            f"{page_ranges(pages.bombs)}"
        )
    broken = set(pages.failed) | set(pages.damaged)
    if recovered or len(broken) == pages.n_read:
        return f"{path} is not a readable PDF (no page could be read)"
    return f"{path} has no extractable text (probably a scanned document); OCR is not part of this app"


def _warnings(
    pages: _Pages, n_pages: int, recovered: bool, pypdf_complaints: int, limits: IngestLimits
) -> list[str]:
    warnings: list[str] = []
    if recovered:
        warnings.append("the PDF is damaged (cut short?); only what could be recovered was read")
    if pages.text_capped:
        warnings.append(
            f"only the first {pages.n_read} of {n_pages} pages were read "
            f"(text cap of {human_bytes(limits.max_text_bytes)} characters reached)"
        )
    elif pages.n_read < n_pages:
        warnings.append(
            f"only the first {pages.n_read} of {n_pages} pages were read (page cap {limits.max_pdf_pages})"
        )
    if pages.bombs:
        warnings.append(
            f"pages skipped because a compressed stream inflates past the "
            f"{human_bytes(limits.max_pdf_stream_bytes)} cap (a decompression bomb?): "
            f"{page_ranges(pages.bombs)}"
        )
    if pages.failed:
        warnings.append(f"pages that could not be read: {page_ranges(pages.failed)}")
    if pages.damaged:
        warnings.append(f"damaged pages, some of their text may be missing: {page_ranges(pages.damaged)}")
    empty = sorted(set(pages.empty) - set(pages.damaged))
    if empty:
        warnings.append(f"pages with no text: {page_ranges(empty)}")
    if pypdf_complaints and not recovered:
        warnings.append(
            f"pypdf reported {pypdf_complaints} problem(s) in the file's structure; some text may be missing"
        )
    return warnings


def _open(path: Path, fh: BinaryIO, password: str | None, limits: IngestLimits):
    """A reader with its page count, trying a repair when the file is cut short.

    Both checks that keep garbage cheap come first: a PDF header in the first KB, and an
    end marker in the last MB (pypdf would otherwise search the whole file for it).
    Returns (reader, n_pages, recovered)."""
    if PDF_MAGIC not in fh.read(HEADER_WINDOW):
        raise IngestError(f"{path} is not a readable PDF (no %PDF- header: not a PDF file)")
    size = os.fstat(fh.fileno()).st_size
    why = "no %%EOF marker at the end: cut short?"
    if _tail_holds(fh, size, b"%%EOF"):
        try:
            return (*_reader_with_pages(path, fh, password), False)
        except IngestError:
            raise
        except Exception as e:  # pypdf raises many kinds on garbage input
            why = _why(e)
    if size > limits.max_pdf_repair_bytes:
        raise IngestError(
            f"{path} is not a readable PDF ({why}); at {human_bytes(size)} it is too large "
            f"to repair (cap {human_bytes(limits.max_pdf_repair_bytes)})"
        )
    fh.seek(0)
    repaired = _repair(fh.read())
    if repaired is not None:
        try:
            return (*_reader_with_pages(path, io.BytesIO(repaired), password), True)
        except IngestError:
            raise
        except Exception:
            pass
    raise IngestError(f"{path} is not a readable PDF ({why})")


def _tail_holds(fh: BinaryIO, size: int, marker: bytes) -> bool:
    fh.seek(max(0, size - TAIL_WINDOW))
    found = marker in fh.read(TAIL_WINDOW)
    fh.seek(0)
    return found


def _reader_with_pages(path: Path, source: BinaryIO, password: str | None):
    reader = PdfReader(source, strict=False)
    if reader.is_encrypted:
        _decrypt(reader, path, password)
    return reader, _page_count(path, reader)


def _page_count(path: Path, reader) -> int:
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
    if PDF_MAGIC not in data[:HEADER_WINDOW]:
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
    try:
        result = reader.decrypt(password if password is not None else "")
    except DependencyError as e:
        raise IngestError(f"{path} is encrypted with a method this install cannot open ({_why(e)})") from e
    except Exception as e:
        raise IngestError(f"{path} is encrypted and could not be decrypted ({_why(e)})") from e
    if result == PasswordType.NOT_DECRYPTED:
        if password:
            raise PasswordError(f"{path} is encrypted and the password is wrong")
        raise PasswordError(f"{path} is encrypted; a password is needed to open it")


def _why(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    if len(msg) > 160:
        msg = msg[:157] + "..."
    return f"{e.__class__.__name__}: {msg}" if msg else e.__class__.__name__
