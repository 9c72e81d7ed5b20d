"""Offsets between the document, the text a view shows, and Qt's UTF-16 positions.

A view may show the whole document or only some ranges of it (with markers
between them). A TextProjection keeps the mapping both ways. Qt counts
positions in UTF-16 units, Python in code points; Utf16Index converts, which
matters for PDFs full of mathematical letters or code with emoji.

Building a projection of many ranges costs Python work per range, so the kept-token view
builds big ones on a worker; looking an offset up is a bisection, cheap on any thread.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Range = tuple[int, int]


@dataclass(frozen=True)
class Piece:
    view_start: int
    doc_start: int
    length: int


class TextProjection:
    def __init__(self, text: str, pieces: list[Piece], markers: list[Range]) -> None:
        self.text = text
        self.pieces = pieces  # ascending in both view and document order
        self.markers = markers  # view ranges that are not document text
        self._view_starts = [p.view_start for p in pieces]
        self._doc_starts = [p.doc_start for p in pieces]

    @classmethod
    def whole(cls, doc_text: str) -> TextProjection:
        return cls(doc_text, [Piece(0, 0, len(doc_text))], [])

    @classmethod
    def of_ranges(
        cls, doc_text: str, ranges: Sequence[Range], marker: Callable[[int], str]
    ) -> TextProjection:
        """Show only `ranges`; where text was left out, insert marker(chars_left_out)."""
        parts: list[str] = []
        pieces: list[Piece] = []
        markers: list[Range] = []
        view_pos = doc_pos = 0
        for start, end in ranges:
            if start > doc_pos:
                view_pos = _append_marker(parts, markers, view_pos, marker(start - doc_pos))
            pieces.append(Piece(view_pos, start, end - start))
            parts.append(doc_text[start:end])
            view_pos += end - start
            doc_pos = end
        if doc_pos < len(doc_text):
            _append_marker(parts, markers, view_pos, marker(len(doc_text) - doc_pos))
        return cls("".join(parts), pieces, markers)

    def to_view(self, doc_offset: int) -> int:
        """Where `doc_offset` shows; a hidden offset maps to the next shown text."""
        if not self.pieces:
            return 0
        i = bisect.bisect_right(self._doc_starts, doc_offset) - 1
        if i >= 0 and doc_offset < self.pieces[i].doc_start + self.pieces[i].length:
            return self.pieces[i].view_start + doc_offset - self.pieces[i].doc_start
        if i + 1 < len(self.pieces):
            return self.pieces[i + 1].view_start
        last = self.pieces[-1]
        return last.view_start + last.length

    def to_doc(self, view_offset: int) -> int | None:
        """The document offset shown at `view_offset`, or None on a marker."""
        i = bisect.bisect_right(self._view_starts, view_offset) - 1
        if i >= 0:
            piece = self.pieces[i]
            if view_offset < piece.view_start + piece.length:
                return piece.doc_start + view_offset - piece.view_start
        return None

    def doc_ranges(self, view_start: int, view_end: int) -> list[Range]:
        """The document ranges shown inside the view range [view_start, view_end)."""
        out = []
        i = max(bisect.bisect_right(self._view_starts, view_start) - 1, 0)  # the piece holding view_start
        while i < len(self.pieces) and self.pieces[i].view_start < view_end:
            piece = self.pieces[i]
            lo = max(view_start, piece.view_start)
            hi = min(view_end, piece.view_start + piece.length)
            if lo < hi:
                out.append((piece.doc_start + lo - piece.view_start, piece.doc_start + hi - piece.view_start))
            i += 1
        return out


def _append_marker(parts: list[str], markers: list[Range], view_pos: int, text: str) -> int:
    parts.append(text)
    markers.append((view_pos, view_pos + len(text)))
    return view_pos + len(text)


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # characters beyond the BMP


class Utf16Index:
    """Python str offsets <-> Qt (UTF-16) positions for one text."""

    def __init__(self, text: str) -> None:
        # Each character beyond the BMP takes two UTF-16 units: remember where they are. The regex
        # scans in C, so the Python work grows with the number of such characters, not the text.
        self._astral = [] if text.isascii() else [m.start() for m in _ASTRAL.finditer(text)]
        self._astral_qt = [p + k for k, p in enumerate(self._astral)]

    def to_qt(self, offset: int) -> int:
        return offset + bisect.bisect_left(self._astral, offset)

    def to_py(self, position: int) -> int:
        return position - bisect.bisect_left(self._astral_qt, position)
