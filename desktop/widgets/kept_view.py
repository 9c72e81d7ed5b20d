"""The kept-token view: the document with kept chunks shaded by importance.

Left: pages, sections or files (click to jump). Centre: the text, highlighted, or only
what the draft dropped. Right: a minimap of the whole document.

A document may hold 32 M characters, so the GUI thread's work is bounded whatever its size:
the editor holds one part of at most PAGE_CHARS characters (the minimap, the page list and
the Earlier/Later buttons move between parts), and only that part is indexed and
highlighted. Mapping a selection onto the document and building the dropped-only text grow
with the document: past INLINE_CHARS they run on a worker, and the view updates when done.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.model.failure_text import failure_text
from desktop.model.selection_map import ChunkSpan, SelectionLayout, merge_ranges
from desktop.model.text_projection import TextProjection, Utf16Index
from desktop.sessions.worker import Worker, make_pool
from desktop.widgets import heat_colors
from desktop.widgets.kept_render import (
    PreparedView,
    RangeHighlighter,
    highlight_format,
    prepare_selection_view,
    prepare_view,
)
from desktop.widgets.minimap import Minimap
from desktop.widgets.theme import highlight_css
from engine.api import Document, Selection, format_percent_short

NO_SELECTION_HINT = "Run SpecPrefill to see which parts of the document the draft keeps."
PREPARING = "Mapping the draft's selection onto the document…"
PAGE_CHARS = 200_000  # the most text the editor holds (and the GUI thread indexes) at a time
INLINE_CHARS = PAGE_CHARS  # up to this size, preparing a selection costs no more than showing a part


class KeptTokenView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._pool = make_pool(1)
        self._preparing: Worker | None = None
        self._view: PreparedView | None = None
        self._page_start = 0
        self._page_text = ""
        self._utf16 = Utf16Index("")  # of the part in the editor

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
        self.page_label = QLabel("")
        self.earlier_button = QToolButton()
        self.earlier_button.setText("◀ Earlier")
        self.earlier_button.clicked.connect(lambda: self._turn_page(-1))
        self.later_button = QToolButton()
        self.later_button.setText("Later ▶")
        self.later_button.clicked.connect(lambda: self._turn_page(1))
        self.minimap = Minimap()
        self.minimap.offsetClicked.connect(self.jump_to_offset)
        self._highlighter = RangeHighlighter(self.text.document())
        self._build_layout()
        self._update_page_bar()

    def _build_layout(self) -> None:
        header = QHBoxLayout()
        header.addWidget(self.summary, 1)
        header.addWidget(QLabel(legend_html()))
        header.addWidget(self.dropped_toggle)

        centre = QWidget()
        centre_layout = QVBoxLayout(centre)
        centre_layout.setContentsMargins(0, 0, 0, 0)
        text_row = QHBoxLayout()
        text_row.addWidget(self.text, 1)
        text_row.addWidget(self.minimap)
        footer = QHBoxLayout()
        footer.addWidget(self.location, 1)
        footer.addWidget(self.earlier_button)
        footer.addWidget(self.page_label)
        footer.addWidget(self.later_button)
        centre_layout.addLayout(text_row, 1)
        centre_layout.addLayout(footer)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setObjectName("keptSplitter")  # the window remembers its position by this name
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
        return self._view.document if self._view else None

    @property
    def spans(self) -> list[ChunkSpan]:
        return list(self._layout.spans) if self._layout else []

    @property
    def is_preparing(self) -> bool:
        """A selection or the dropped-only text is being prepared on the worker."""
        return self._preparing is not None

    @property
    def _layout(self) -> SelectionLayout | None:
        return self._view.layout if self._view else None

    @property
    def _projection(self) -> TextProjection:
        return self._view.projection if self._view else TextProjection.whole("")

    def set_document(self, document: Document) -> None:
        self._stop_preparing()
        self.dropped_toggle.blockSignals(True)
        self.dropped_toggle.setChecked(False)
        self.dropped_toggle.blockSignals(False)
        self.minimap.set_document(len(document.text), [s.start for s in document.segments])
        self._apply(prepare_view(document, None, False))  # the text as it is: nothing grows with it

    def set_selection(self, document: Document, selection: Selection) -> None:
        if document is not self.document:
            self.set_document(document)
        dropped_only = self.dropped_toggle.isChecked()
        self._prepare(document, lambda: prepare_selection_view(document, selection, dropped_only))

    def clear_selection(self) -> None:
        if self.document is not None:
            self.set_document(self.document)

    def show_dropped_only(self, dropped_only: bool) -> None:
        if self.dropped_toggle.isChecked() != dropped_only:
            self.dropped_toggle.setChecked(dropped_only)  # re-enters through `toggled`
            return
        document, layout = self.document, self._layout
        if document is not None and layout is not None:
            self._prepare(document, lambda: prepare_view(document, layout, dropped_only))

    def shown_text(self) -> str:
        """All the text the view shows (every part), with markers where text is left out."""
        return self._projection.text

    def kept_ranges(self) -> list[tuple[int, int]]:
        return list(self._layout.kept) if self._layout else []

    def dropped_ranges(self) -> list[tuple[int, int]]:
        return list(self._layout.dropped) if self._layout else []

    def highlighted_ranges(self) -> list[tuple[int, int]]:
        """Document ranges that carry a background in the text layout (the part shown), read back from Qt."""
        ranges = []
        block = self.text.document().begin()
        while block.isValid():
            for fmt_range in block.layout().formats():
                if fmt_range.format.background().style() != Qt.BrushStyle.NoBrush:
                    qt_start = block.position() + fmt_range.start
                    view_start = self._page_start + self._utf16.to_py(qt_start)
                    view_end = self._page_start + self._utf16.to_py(qt_start + fmt_range.length)
                    ranges.extend(self._projection.doc_ranges(view_start, view_end))
            block = block.next()
        return merge_ranges(ranges)

    # --- preparing: inline for a small document, on the worker for a big one ---------------------

    def _prepare(self, document: Document, build: Callable[[], PreparedView]) -> None:
        self._stop_preparing()
        if len(document.text) <= INLINE_CHARS:
            self._apply(build())
            return
        self.summary.setText(PREPARING)
        worker = Worker(lambda ctx: build(), name="preparing the kept-token view")
        worker.finished.connect(lambda view: self._on_prepared(worker, view))
        worker.failed.connect(lambda error: self._on_prepare_failed(worker, error))
        self._preparing = worker.start(self._pool)

    def _stop_preparing(self) -> None:
        if self._preparing is not None:
            self._preparing.cancel()
            self._preparing = None

    def _on_prepared(self, worker: Worker, view: PreparedView) -> None:
        if worker is self._preparing:  # else superseded by a newer document, selection or toggle
            self._preparing = None
            self._apply(view)

    def _on_prepare_failed(self, worker: Worker, error: Exception) -> None:
        if worker is self._preparing:
            self._preparing = None
            self.summary.setText(f"Could not show the selection: {failure_text(error, worker.name)}")

    def _apply(self, view: PreparedView) -> None:
        same_text = self._view is not None and view.projection.text is self._view.projection.text
        self._view = view
        self.minimap.set_bands(view.bands)
        self.summary.setText(self._summary_text() if view.layout else NO_SELECTION_HINT)
        self.dropped_toggle.setEnabled(view.layout is not None)
        self._fill_segments()
        self._show_part(self._page_start if same_text else 0)  # a new selection keeps the reader's place

    # --- rendering one part -----------------------------------------------------------------

    def _show_part(self, start: int) -> None:
        """Put the view text's part from `start` in the editor, with its highlights."""
        end = min(start + PAGE_CHARS, len(self._projection.text))
        page = self._projection.text[start:end]
        if page != self._page_text or self.text.document().isEmpty():
            self._highlighter.set_ranges([])  # no stale ranges while the new text lays out
            self.text.setPlainText(page)
            self._page_text = page
        self._page_start = start
        self._utf16 = Utf16Index(page)
        self._highlighter.set_ranges(self._part_formats(start, end))
        self._update_page_bar()
        self._update_viewport()

    def _part_formats(self, start: int, end: int) -> list[tuple[int, int, QTextCharFormat]]:
        """The highlights inside [start, end), in the editor's (UTF-16) positions: found by bisection."""
        view, to_qt = self._view, self._utf16.to_qt
        formats = []
        i = bisect.bisect_right(view.highlight_ends, start)
        while i < len(view.highlights) and view.highlights[i][0] < end:
            low, high, color = view.highlights[i]
            low, high = to_qt(max(low, start) - start), to_qt(min(high, end) - start)
            formats.append((low, high, highlight_format(color)))
            i += 1
        return formats

    def _part_of(self, view_offset: int) -> int:
        """Where the part holding `view_offset` starts."""
        last = max(len(self._projection.text) - 1, 0)
        return min(view_offset, last) // PAGE_CHARS * PAGE_CHARS

    def _turn_page(self, step: int) -> None:
        start = self._page_start + step * PAGE_CHARS
        if 0 <= start < len(self._projection.text):
            self._show_part(start)
            self.text.moveCursor(QTextCursor.MoveOperation.Start)

    def _update_page_bar(self) -> None:
        length = len(self._projection.text)
        parts = -(-length // PAGE_CHARS)
        for widget in (self.page_label, self.earlier_button, self.later_button):
            widget.setVisible(parts > 1)
        self.page_label.setText(f"part {self._page_start // PAGE_CHARS + 1} of {parts}")
        self.earlier_button.setEnabled(self._page_start > 0)
        self.later_button.setEnabled(self._page_start + PAGE_CHARS < length)

    def _summary_text(self) -> str:
        layout, doc_length = self._layout, len(self.document.text)
        fraction = layout.kept_chars / doc_length if doc_length else 0.0
        return (
            f"Kept {format_percent_short(fraction)} of the document: {layout.kept_chunks} of {len(layout.spans)} chunks"
            f" ({layout.protected_chunks} protected)"
        )

    def _fill_segments(self) -> None:
        self.segments.clear()
        document, layout = self.document, self._layout
        if document is None:
            return
        for index, segment in enumerate(document.segments):
            label = segment.label
            if layout is not None:
                label += f"  ·  {format_percent_short(layout.coverage[index])} kept"
            item = QListWidgetItem(label)
            item.setData(Qt.ItemDataRole.UserRole, index)
            self.segments.addItem(item)

    # --- navigation ----------------------------------------------------------------------

    def _on_segment_chosen(self, item: QListWidgetItem) -> None:
        self.jump_to_segment(item.data(Qt.ItemDataRole.UserRole))

    def jump_to_segment(self, index: int) -> None:
        document = self.document
        if document is not None and 0 <= index < len(document.segments):
            self.jump_to_offset(document.segments[index].start)

    def jump_to_offset(self, doc_offset: int) -> None:
        """Put `doc_offset` (or the next shown text) at the top of the view, showing its part first."""
        view_offset = self._projection.to_view(doc_offset)
        part = self._part_of(view_offset)
        if part != self._page_start:
            self._show_part(part)
        position = self._utf16.to_qt(view_offset - part)
        cursor = self.text.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()  # scrolled to the end first, the target lands at the top
        cursor.setPosition(min(position, self.text.document().characterCount() - 1))
        self.text.setTextCursor(cursor)
        self.text.ensureCursorVisible()

    def cursor_doc_offset(self) -> int | None:
        return self._projection.to_doc(
            self._page_start + self._utf16.to_py(self.text.textCursor().position())
        )

    def _update_viewport(self) -> None:
        viewport = self.text.viewport()
        first = self.text.cursorForPosition(QPoint(0, 0)).position()
        last = self.text.cursorForPosition(QPoint(viewport.width() - 1, viewport.height() - 1)).position()
        start = self._page_start
        shown = self._projection.doc_ranges(
            start + self._utf16.to_py(first), start + self._utf16.to_py(last) + 1
        )
        if shown:
            self.minimap.set_viewport(shown[0][0], shown[-1][1])

    def _update_location(self) -> None:
        offset = self.cursor_doc_offset()
        document = self.document
        if document is None or offset is None:
            self.location.setText("")
            return
        segment = document.segment_at(offset)
        parts = [segment.label if segment else "between segments"]
        span = self._span_at(offset)
        if span is not None:
            state = "protected" if span.protected else ("kept" if span.kept else "dropped")
            parts.append(f"chunk {span.index}: {state}, importance {span.importance:.2f}")
        self.location.setText("  ·  ".join(parts))

    def _span_at(self, offset: int) -> ChunkSpan | None:
        layout = self._layout
        if layout is None:
            return None
        i = bisect.bisect_right(layout.span_starts, offset) - 1
        if i >= 0 and offset < layout.spans[i].end:
            return layout.spans[i]
        return None


def legend_html() -> str:
    def swatch(color: QColor, label: str) -> str:
        return f'<span style="{highlight_css(color)}">&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;{label}'

    items = [
        swatch(heat_colors.kept_color(1.0), "most important"),
        swatch(heat_colors.kept_color(0.0), "kept"),
        swatch(heat_colors.PROTECTED, "protected"),
        swatch(heat_colors.DROPPED, "dropped"),
    ]
    return "&nbsp;&nbsp;".join(items)
