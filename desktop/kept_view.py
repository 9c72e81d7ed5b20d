"""The kept-token view: the document with kept chunks shaded by importance.

Left: pages or files (click to jump). Centre: the text, highlighted, or only
what the draft dropped. Right: a minimap of the whole document.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.api import Selection
from engine.api import Document
from desktop import heat_colors
from desktop.formatting import fmt_count, fmt_percent
from desktop.minimap import Minimap, bands_for
from desktop.selection_map import ChunkSpan, chunk_spans, complement, kept_ranges, merge_ranges, segment_coverage
from desktop.text_projection import TextProjection, Utf16Index

NO_SELECTION_HINT = "Run SpecPrefill to see which parts of the document the draft keeps."


def _dropped_marker(n_chars: int) -> str:
    return f"\n[… {fmt_count(n_chars)} kept characters not shown …]\n"


class _RangeHighlighter(QSyntaxHighlighter):
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
    return fmt


def _marker_format() -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(heat_colors.MARKER_TEXT)
    fmt.setFontItalic(True)
    return fmt


class KeptTokenView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._document: Document | None = None
        self._spans: list[ChunkSpan] = []
        self._projection = TextProjection.whole("")
        self._utf16 = Utf16Index("")

        self.summary = QLabel(NO_SELECTION_HINT)
        self.summary.setObjectName("keptSummary")
        self.dropped_toggle = QCheckBox("Show only what was dropped")
        self.dropped_toggle.setEnabled(False)
        self.dropped_toggle.toggled.connect(self.show_dropped_only)
        self.segments = QListWidget()
        self.segments.setObjectName("segmentList")
        self.segments.itemClicked.connect(self._on_segment_chosen)
        self.segments.itemActivated.connect(self._on_segment_chosen)
        self.text = QPlainTextEdit()
        self.text.setObjectName("keptText")
        self.text.setReadOnly(True)
        self.text.setFont(QFont("monospace"))
        self.text.verticalScrollBar().valueChanged.connect(self._update_viewport)
        self.text.cursorPositionChanged.connect(self._update_location)
        self.location = QLabel("")
        self.minimap = Minimap()
        self.minimap.offsetClicked.connect(self.jump_to_offset)
        self._highlighter = _RangeHighlighter(self.text.document())
        self._build_layout()

    def _build_layout(self) -> None:
        header = QHBoxLayout()
        header.addWidget(self.summary, 1)
        header.addWidget(QLabel(_legend_html()))
        header.addWidget(self.dropped_toggle)

        centre = QWidget()
        centre_layout = QVBoxLayout(centre)
        centre_layout.setContentsMargins(0, 0, 0, 0)
        text_row = QHBoxLayout()
        text_row.addWidget(self.text, 1)
        text_row.addWidget(self.minimap)
        centre_layout.addLayout(text_row, 1)
        centre_layout.addWidget(self.location)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.segments)
        splitter.addWidget(centre)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([220, 900])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(header)
        layout.addWidget(splitter, 1)

    # --- what the view holds -------------------------------------------------------------

    @property
    def document(self) -> Document | None:
        return self._document

    @property
    def spans(self) -> list[ChunkSpan]:
        return list(self._spans)

    def set_document(self, document: Document) -> None:
        self._document = document
        self._spans = []
        self.dropped_toggle.blockSignals(True)
        self.dropped_toggle.setChecked(False)
        self.dropped_toggle.blockSignals(False)
        self.dropped_toggle.setEnabled(False)
        self.summary.setText(NO_SELECTION_HINT)
        self.minimap.set_document(len(document.text), [s.start for s in document.segments])
        self._fill_segments()
        self._show(TextProjection.whole(document.text), [])

    def set_selection(self, document: Document, selection: Selection) -> None:
        if document is not self._document:
            self.set_document(document)
        self._spans = chunk_spans(selection, len(document.text))
        self.minimap.set_bands(bands_for(self._spans))
        self.summary.setText(self._summary_text())
        self.dropped_toggle.setEnabled(True)
        self._fill_segments()
        self._render()

    def clear_selection(self) -> None:
        if self._document is not None:
            self.set_document(self._document)

    def show_dropped_only(self, dropped_only: bool) -> None:
        if self.dropped_toggle.isChecked() != dropped_only:
            self.dropped_toggle.setChecked(dropped_only)  # re-enters through `toggled`
            return
        self._render()

    def shown_text(self) -> str:
        return self._projection.text

    def kept_ranges(self) -> list[tuple[int, int]]:
        return kept_ranges(self._spans)

    def dropped_ranges(self) -> list[tuple[int, int]]:
        length = len(self._document.text) if self._document else 0
        return complement(self.kept_ranges(), length) if self._spans else []

    def highlighted_ranges(self) -> list[tuple[int, int]]:
        """Document ranges that carry a background in the text layout, read back from Qt."""
        ranges = []
        block = self.text.document().begin()
        while block.isValid():
            for fmt_range in block.layout().formats():
                if fmt_range.format.background().style() != Qt.BrushStyle.NoBrush:
                    qt_start = block.position() + fmt_range.start
                    view_start = self._utf16.to_py(qt_start)
                    view_end = self._utf16.to_py(qt_start + fmt_range.length)
                    ranges.extend(self._projection.doc_ranges(view_start, view_end))
            block = block.next()
        return merge_ranges(ranges)

    # --- rendering -----------------------------------------------------------------------

    def _render(self) -> None:
        doc = self._document
        if doc is None:
            return
        if self.dropped_toggle.isChecked():
            projection = TextProjection.of_ranges(doc.text, self.dropped_ranges(), _dropped_marker)
            formats = [(start, end, _marker_format()) for start, end in projection.markers]
        else:
            projection = TextProjection.whole(doc.text)
            formats = [(s.start, s.end, _background(heat_colors.span_color(s))) for s in self._spans if s.kept]
        self._show(projection, formats)

    def _show(self, projection: TextProjection, view_formats: list[tuple[int, int, QTextCharFormat]]) -> None:
        """Put `projection.text` in the editor with formats given in view (Python) offsets."""
        if projection.text != self._projection.text or self.text.document().isEmpty():
            self._highlighter.set_ranges([])  # no stale ranges while the new text lays out
            self.text.setPlainText(projection.text)
        self._projection = projection
        self._utf16 = Utf16Index(projection.text)
        to_qt = self._utf16.to_qt
        self._highlighter.set_ranges([(to_qt(s), to_qt(e), f) for s, e, f in view_formats])
        self._update_viewport()

    def _summary_text(self) -> str:
        doc_length = len(self._document.text) if self._document else 0
        kept_chars = sum(e - s for s, e in self.kept_ranges())
        kept_chunks = sum(1 for s in self._spans if s.kept)
        protected = sum(1 for s in self._spans if s.protected)
        fraction = kept_chars / doc_length if doc_length else 0.0
        return (
            f"Kept {fmt_percent(fraction)} of the document: {kept_chunks} of {len(self._spans)} chunks"
            f" ({protected} protected)"
        )

    def _fill_segments(self) -> None:
        self.segments.clear()
        if self._document is None:
            return
        segments = self._document.segments
        coverage = segment_coverage(self.kept_ranges(), [(s.start, s.end) for s in segments])
        for index, segment in enumerate(segments):
            label = segment.label
            if self._spans:
                label += f"  ·  {fmt_percent(coverage[index])} kept"
            item = QListWidgetItem(label)
            item.setData(Qt.ItemDataRole.UserRole, index)
            self.segments.addItem(item)

    # --- navigation ----------------------------------------------------------------------

    def _on_segment_chosen(self, item: QListWidgetItem) -> None:
        self.jump_to_segment(item.data(Qt.ItemDataRole.UserRole))

    def jump_to_segment(self, index: int) -> None:
        if self._document is not None and 0 <= index < len(self._document.segments):
            self.jump_to_offset(self._document.segments[index].start)

    def jump_to_offset(self, doc_offset: int) -> None:
        """Put `doc_offset` (or the next shown text) at the top of the view."""
        position = self._utf16.to_qt(self._projection.to_view(doc_offset))
        cursor = self.text.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()  # scrolled to the end first, the target lands at the top
        cursor.setPosition(min(position, self.text.document().characterCount() - 1))
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()

    def cursor_doc_offset(self) -> int | None:
        return self._projection.to_doc(self._utf16.to_py(self.text.textCursor().position()))

    def _update_viewport(self) -> None:
        viewport = self.text.viewport()
        first = self.text.cursorForPosition(QPoint(0, 0)).position()
        last = self.text.cursorForPosition(QPoint(viewport.width() - 1, viewport.height() - 1)).position()
        shown = self._projection.doc_ranges(self._utf16.to_py(first), self._utf16.to_py(last) + 1)
        if shown:
            self.minimap.set_viewport(shown[0][0], shown[-1][1])

    def _update_location(self) -> None:
        offset = self.cursor_doc_offset()
        if self._document is None or offset is None:
            self.location.setText("")
            return
        segment = self._document.segment_at(offset)
        parts = [segment.label if segment else "between segments"]
        span = self._span_at(offset)
        if span is not None:
            state = "protected" if span.protected else ("kept" if span.kept else "dropped")
            parts.append(f"chunk {span.index}: {state}, importance {span.importance:.2f}")
        self.location.setText("  ·  ".join(parts))

    def _span_at(self, offset: int) -> ChunkSpan | None:
        i = bisect.bisect_right([s.start for s in self._spans], offset) - 1
        if i >= 0 and offset < self._spans[i].end:
            return self._spans[i]
        return None


def _legend_html() -> str:
    def swatch(color: QColor, label: str) -> str:
        return f'<span style="background:{color.name()}">&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;{label}'

    items = [
        swatch(heat_colors.kept_color(1.0), "most important"),
        swatch(heat_colors.kept_color(0.0), "kept"),
        swatch(heat_colors.PROTECTED, "protected"),
        swatch(heat_colors.DROPPED, "dropped"),
    ]
    return "&nbsp;&nbsp;".join(items)
