"""The one colour scale for importance, shared by the text highlight, the minimap and the legend."""

from __future__ import annotations

from PySide6.QtGui import QColor

from desktop.model.selection_map import ChunkSpan

_LOW = (255, 236, 179)  # pale amber: kept, barely above the cut
_HIGH = (230, 81, 0)  # deep orange: what the draft cared about most
PROTECTED = QColor(144, 202, 249)  # kept by rule (prompt head, question tail), not by score
DROPPED = QColor(224, 224, 224)
MARKER_TEXT = QColor(120, 120, 120)


def kept_color(importance: float) -> QColor:
    """Colour of a kept chunk; importance in [0, 1]."""
    t = min(max(importance, 0.0), 1.0)
    r, g, b = (round(lo + (hi - lo) * t) for lo, hi in zip(_LOW, _HIGH))
    return QColor(r, g, b)


def dropped_color(importance: float) -> QColor:
    """Dropped chunks in grey; the ones that nearly made it a little darker."""
    shade = round(236 - 56 * min(max(importance, 0.0), 1.0))
    return QColor(shade, shade, shade)


def span_color(span: ChunkSpan) -> QColor:
    if span.protected:
        return PROTECTED
    return kept_color(span.shade) if span.kept else dropped_color(span.shade)
