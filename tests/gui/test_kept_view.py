"""The kept-token view: highlights match kept chunks, shading follows scores, dropped-only, jumps, minimap."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt

from desktop.widgets import heat_colors
from desktop.widgets.kept_view import KeptTokenView
from engine.core.settings import RunSettings
from engine.ingest.document import Document, Segment
from tests.gui.conftest import CHARS_PER_TOKEN, build_prompt, make_selection


def numbered_text(n_words: int, prefix: str = "") -> str:
    """Unique 6-char words, so any slice of the text is found only where it came from."""
    return prefix + "".join(f"{i:05d}," for i in range(n_words))


def three_pages(text: str) -> list[Segment]:
    third = len(text) // 3
    return [
        Segment("page 1", "page", 0, third),
        Segment("page 2", "page", third, 2 * third),
        Segment("page 3", "page", 2 * third, len(text)),
    ]


def expected_kept_ranges(doc_text: str, selection) -> list[tuple[int, int]]:
    """Worked out char by char from the fake's layout (a token every 4 prompt chars), not via desktop code."""
    kept = set(selection.kept_chunks)
    doc_start = selection.doc_char_span[0]
    flags = [
        ((doc_start + c) // CHARS_PER_TOKEN) // selection.chunk_size in kept for c in range(len(doc_text))
    ]
    ranges, start = [], None
    for c, flag in enumerate(flags + [False]):
        if flag and start is None:
            start = c
        elif not flag and start is not None:
            ranges.append((start, c))
            start = None
    return ranges


@pytest.fixture
def doc() -> Document:
    text = numbered_text(3000)
    return Document(Path("/docs/report.pdf"), "pdf", text, three_pages(text), [])


@pytest.fixture
def selection(doc):
    prompt, span = build_prompt(doc.text, "What is this?")
    return make_selection(prompt, span, RunSettings(keep=0.25, chunk_size=8))


@pytest.fixture
def view(qtbot) -> KeptTokenView:
    view = KeptTokenView()
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.show()
    return view


def background_at(view: KeptTokenView, offset: int):
    """The background colour Qt actually laid out at document offset `offset` (full view)."""
    block = view.text.document().findBlock(offset)
    for fmt_range in block.layout().formats():
        start = block.position() + fmt_range.start
        if start <= offset < start + fmt_range.length:
            return fmt_range.format.background().color()
    return None


def test_highlighted_ranges_match_the_kept_chunks(view, doc, selection):
    view.set_selection(doc, selection)
    expected = expected_kept_ranges(doc.text, selection)
    assert len(expected) > 5
    assert view.highlighted_ranges() == expected
    assert view.shown_text() == doc.text


def test_shading_follows_importance_and_protected_chunks_stand_out(view, doc, selection):
    # Protect a chunk inside the document too (the fake only protects the prompt's head and tail).
    selection = replace(
        selection,
        protected_chunks=sorted({*selection.protected_chunks, 10}),
        kept_chunks=sorted({*selection.kept_chunks, 10}),
    )
    view.set_selection(doc, selection)
    kept_spans = [s for s in view.spans if s.kept and not s.protected]
    strongest = max(kept_spans, key=lambda s: s.score)
    weakest = min(kept_spans, key=lambda s: s.score)
    # Shades spread over the kept chunks' own score range: the full scale is used.
    assert (strongest.shade, weakest.shade) == (1.0, 0.0)
    strong_color = background_at(view, strongest.start)
    weak_color = background_at(view, weakest.start)
    assert strong_color == heat_colors.kept_color(1.0)
    assert weak_color == heat_colors.kept_color(0.0)
    assert strong_color.green() < weak_color.green()  # deeper orange for more important text
    protected = next(s for s in view.spans if s.protected)
    assert background_at(view, protected.start) == heat_colors.PROTECTED
    dropped = next(s for s in view.spans if not s.kept)
    assert background_at(view, dropped.start) is None


def test_show_only_dropped_hides_kept_text_and_can_be_undone(view, doc, selection):
    view.set_selection(doc, selection)
    kept, dropped = view.kept_ranges(), view.dropped_ranges()
    view.dropped_toggle.click()
    shown = view.shown_text()
    assert all(doc.text[s:e] in shown for s, e in dropped)
    assert all(doc.text[s:e] not in shown for s, e in kept if e - s >= 12)
    assert "kept characters not shown" in shown
    assert view.highlighted_ranges() == []  # nothing kept is on screen to highlight
    view.dropped_toggle.click()
    assert view.shown_text() == doc.text
    assert view.highlighted_ranges() == kept


def test_dropped_toggle_is_off_and_disabled_without_a_selection(view, doc):
    view.set_document(doc)
    assert not view.dropped_toggle.isEnabled()
    assert view.highlighted_ranges() == []
    assert view.segments.count() == 3


def click_item(qtbot, list_widget, row: int) -> None:
    item = list_widget.item(row)
    rect = list_widget.visualItemRect(item)
    qtbot.mouseClick(list_widget.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def test_clicking_a_page_jumps_there(view, doc, selection, qtbot):
    view.set_selection(doc, selection)
    assert [view.segments.item(i).text().split("  ·  ")[0] for i in range(3)] == [
        "page 1",
        "page 2",
        "page 3",
    ]
    assert all("kept" in view.segments.item(i).text() for i in range(3))
    click_item(qtbot, view.segments, 2)
    page3 = doc.segments[2]
    assert view.cursor_doc_offset() == page3.start
    top = view.text.cursorForPosition(QPoint(0, 0)).position()
    assert 0 <= page3.start - top < 400  # the page starts on the first visible line
    assert view.location.text().startswith("page 3")


def test_jump_in_dropped_only_mode_lands_on_the_next_dropped_text(view, doc, selection, qtbot):
    view.set_selection(doc, selection)
    view.show_dropped_only(True)
    click_item(qtbot, view.segments, 1)
    offset = view.cursor_doc_offset()
    assert offset is not None and offset >= doc.segments[1].start
    assert any(s <= offset < e for s, e in view.dropped_ranges())


def test_minimap_has_a_band_per_chunk_and_clicks_jump(view, doc, selection, qtbot):
    view.set_selection(doc, selection)
    bands = view.minimap.bands
    assert len(bands) == len(view.spans)
    kept_span = next(s for s in view.spans if s.kept and not s.protected)
    band = next(b for b in bands if b.start == kept_span.start)
    assert band.color == heat_colors.kept_color(kept_span.shade)
    y = int(view.minimap.height() * 0.9)
    qtbot.mouseClick(view.minimap, Qt.MouseButton.LeftButton, pos=QPoint(5, y))
    offset = view.cursor_doc_offset()
    assert doc.segment_at(offset).label == "page 3"
    assert abs(offset - 0.9 * len(doc.text)) < len(doc.text) * 0.03


def test_highlights_stay_aligned_after_characters_outside_the_bmp(view, selection):
    # Mathematical italic letters take two UTF-16 units in Qt but one char in Python.
    text = numbered_text(3000, prefix="𝑥𝑦𝑧 ")[: len(numbered_text(3000))]
    doc = Document(Path("/docs/math.pdf"), "pdf", text, three_pages(text), [])
    view.set_selection(doc, selection)
    assert view.highlighted_ranges() == expected_kept_ranges(doc.text, selection)
