"""What the kept-token view paints: its text prepared on any thread (PreparedView: the text or
only the dropped parts, the highlights and the minimap's bands), and the highlighter that paints
the highlights of the part the editor holds."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtGui import QColor, QSyntaxHighlighter, QTextCharFormat, QTextDocument

from desktop.model.selection_map import SelectionLayout, layout_selection
from desktop.model.text_projection import TextProjection
from desktop.widgets import heat_colors
from desktop.widgets.minimap import Band, bands_for
from desktop.widgets.theme import text_on
from engine.api import Document, Selection, format_count

Highlight = tuple[int, int, QColor | None]  # a view range and its background; None: a marker


def _dropped_marker(n_chars: int) -> str:
    return f"\n[… {format_count(n_chars)} kept characters not shown …]\n"


class RangeHighlighter(QSyntaxHighlighter):
    """Applies character formats to absolute (UTF-16) position ranges of the document."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(None)
        self._target = document
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._formats: list[QTextCharFormat] = []

    def set_ranges(self, ranges: Sequence[tuple[int, int, QTextCharFormat]]) -> None:
        ordered = sorted(ranges, key=lambda r: r[0])
        self._starts = [r[0] for r in ordered]
        self._ends = [r[1] for r in ordered]
        self._formats = [r[2] for r in ordered]
        # Attached only while there is something to paint: a big document then loads
        # without a Python callback per block, and detaching clears the old formats.
        if not ordered:
            self.setDocument(None)
            return
        if self.document() is None:
            self.setDocument(self._target)
        self.rehighlight()  # now, not on Qt's deferred pass, so the view is right when this returns

    def highlightBlock(self, text: str) -> None:
        block = self.currentBlock()
        block_start = block.position()
        block_end = block_start + block.length() - 1  # without the block separator
        i = bisect.bisect_right(self._ends, block_start)
        while i < len(self._starts) and self._starts[i] < block_end:
            lo, hi = max(self._starts[i], block_start), min(self._ends[i], block_end)
            if lo < hi:
                self.setFormat(lo - block_start, hi - lo, self._formats[i])
            i += 1


def _background(color: QColor) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setBackground(color)
    fmt.setForeground(text_on(color))  # the theme's text may be light: keep it readable on the shade
    return fmt


def _marker_format() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(heat_colors.MARKER_TEXT)
    fmt.setFontItalic(True)
    return fmt


def highlight_format(color: QColor | None) -> QTextCharFormat:
    return _marker_format() if color is None else _background(color)


# --- what the view shows, prepared on any thread ---------------------------------------------------


@dataclass(frozen=True)
class PreparedView:
    """A document, its selection (if any) and the text to show: built without touching a widget."""

    document: Document
    layout: SelectionLayout | None
    projection: TextProjection
    highlights: list[Highlight]  # in view order, never overlapping
    highlight_ends: list[int]  # highlights[i][1], for bisection
    bands: list[Band]


def prepare_view(document: Document, layout: SelectionLayout | None, dropped_only: bool) -> PreparedView:
    """The whole text with the kept chunks shaded, or only the dropped text with markers between."""
    if layout is not None and dropped_only:
        projection = TextProjection.of_ranges(document.text, layout.dropped, _dropped_marker)
        highlights: list[Highlight] = [(start, end, None) for start, end in projection.markers]
    else:
        projection = TextProjection.whole(document.text)
        highlights = (
            [(s.start, s.end, heat_colors.span_color(s)) for s in layout.spans if s.kept] if layout else []
        )
    bands = bands_for(layout.spans) if layout else []
    return PreparedView(document, layout, projection, highlights, [h[1] for h in highlights], bands)


def prepare_selection_view(document: Document, selection: Selection, dropped_only: bool) -> PreparedView:
    segments = [(s.start, s.end) for s in document.segments]
    return prepare_view(document, layout_selection(selection, len(document.text), segments), dropped_only)
