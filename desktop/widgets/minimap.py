"""A vertical strip showing the whole document: kept bands by importance, dropped in grey.

Clicking or dragging on it asks the text view to go to that place. A document with more
chunks than MAX_BANDS gets one band per run of neighbouring chunks, so painting stays
bounded however long the document is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from desktop.model.selection_map import ChunkSpan
from desktop.widgets import heat_colors

MAX_BANDS = 4096  # more than any screen has pixel rows for the strip


@dataclass(frozen=True)
class Band:
    start: int
    end: int
    color: QColor


def bands_for(spans: Sequence[ChunkSpan], limit: int = MAX_BANDS) -> list[Band]:
    """A band per chunk; past `limit` chunks, a band per group of neighbours, in its most prominent colour."""
    size = -(-len(spans) // limit) if spans else 1  # chunks per band, rounded up
    groups = [spans[i : i + size] for i in range(0, len(spans), size)]
    return [
        Band(group[0].start, group[-1].end, heat_colors.span_color(max(group, key=_prominence)))
        for group in groups
    ]


def _prominence(span: ChunkSpan) -> tuple[bool, float]:
    """Kept (or protected) chunks outrank dropped ones, then the more important the better."""
    return (span.kept or span.protected, span.shade)


class Minimap(QWidget):
    offsetClicked = Signal(int)  # a document char offset

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Expanding)
        self.setMinimumHeight(80)
        self.setToolTip("Whole document: kept chunks coloured by importance, dropped in grey. Click to jump.")
        self._length = 0
        self._bands: list[Band] = []
        self._boundaries: list[int] = []
        self._viewport: tuple[int, int] | None = None

    def sizeHint(self) -> QSize:
        return QSize(28, 200)

    @property
    def bands(self) -> list[Band]:
        return list(self._bands)

    def set_document(self, length: int, boundaries: Sequence[int]) -> None:
        """A new document: no bands yet, segment boundaries as ticks."""
        self._length = length
        self._boundaries = list(boundaries)
        self._bands = []
        self._viewport = None
        self.update()

    def set_bands(self, bands: Sequence[Band]) -> None:
        self._bands = list(bands)
        self.update()

    def set_viewport(self, start: int, end: int) -> None:
        self._viewport = (start, end)
        self.update()

    def offset_at(self, y: float) -> int:
        if self._length <= 0 or self.height() <= 0:
            return 0
        fraction = min(max(y / self.height(), 0.0), 1.0)
        return min(int(fraction * self._length), max(self._length - 1, 0))

    def _y(self, offset: int) -> float:
        return self.height() * offset / self._length if self._length else 0.0

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.fillRect(self.rect(), self.palette().base())
        if self._length > 0:
            self._paint_bands(painter)
            self._paint_boundaries(painter)
            self._paint_viewport(painter)
        painter.setPen(self.palette().mid().color())
        painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        painter.end()

    def _paint_bands(self, painter: QPainter) -> None:
        width = self.width()
        for band in self._bands:
            top = self._y(band.start)
            height = max(self._y(band.end) - top, 1.0)  # a tiny chunk still shows
            painter.fillRect(QRectF(0, top, width, height), band.color)

    def _paint_boundaries(self, painter: QPainter) -> None:
        painter.setPen(QPen(self.palette().dark().color(), 1))
        for offset in self._boundaries[1:]:
            y = self._y(offset)
            painter.drawLine(0, round(y), self.width() // 3, round(y))

    def _paint_viewport(self, painter: QPainter) -> None:
        if self._viewport is None:
            return
        top = self._y(self._viewport[0])
        height = max(self._y(self._viewport[1]) - top, 3.0)
        painter.setPen(QPen(QColor(33, 33, 33), 1))
        painter.setBrush(QColor(0, 0, 0, 30))
        painter.drawRect(QRectF(0.5, top, self.width() - 1.5, height))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.offsetClicked.emit(self.offset_at(event.position().y()))

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.offsetClicked.emit(self.offset_at(event.position().y()))
