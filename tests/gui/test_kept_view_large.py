"""A 30 MB document in the kept-token view: the GUI thread's work is bounded, whatever the document's size.

Nothing is timed. The view may put only a bounded part of the text in the editor, may index
(UTF-16) only a bounded text on the GUI thread, and must map the selection's chunks (work
that grows with the document) on a worker.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import desktop.model.selection_map as selection_map
import desktop.model.text_projection as text_projection
import desktop.widgets.kept_view as kept_view
from engine.api import Document, Selection
from engine.ingest.document import Segment

DOC_CHARS = 30 * 1024 * 1024
GUI_BOUND = 1_000_000  # characters: far below the document, far above any sensible page
CHARS_PER_TOKEN = 64
CHUNK_SIZE = 32


def big_document() -> Document:
    line = "The parser retries failed requests; naïve clients give up early. 0123456789\n"  # not ASCII
    text = (line * (DOC_CHARS // len(line) + 1))[:DOC_CHARS]
    third = len(text) // 3
    segments = [
        Segment(f"page {n + 1}", "page", n * third, (n + 1) * third if n < 2 else len(text)) for n in range(3)
    ]
    return Document(Path("/docs/huge.pdf"), "pdf", text, segments, [])


def big_selection(doc_length: int) -> Selection:
    head = 100  # the system prompt before the document
    offsets = list(range(0, head + doc_length + 50, CHARS_PER_TOKEN))
    starts = list(range(0, len(offsets), CHUNK_SIZE))
    return Selection(
        chunk_size=CHUNK_SIZE,
        chunk_starts=starts,
        chunk_scores=[(i % 7) / 7 for i in range(len(starts))],
        kept_chunks=[i for i in range(len(starts)) if i % 5 == 0],
        protected_chunks=[0],
        token_char_offsets=offsets,
        doc_char_span=(head, head + doc_length),
    )


@pytest.fixture(scope="module")
def doc() -> Document:
    return big_document()


@pytest.fixture
def gui_work(monkeypatch) -> dict:
    """Records the per-character and per-chunk work done on the GUI thread."""
    seen = {"indexed": [], "chunk_maps": 0, "projections": 0}

    def on_gui_thread() -> bool:
        return threading.current_thread() is threading.main_thread()

    real_index, real_spans, real_of_ranges = (
        text_projection.Utf16Index,
        selection_map.chunk_spans,
        text_projection.TextProjection.of_ranges.__func__,
    )

    class CountingIndex(real_index):
        def __init__(self, text: str) -> None:
            if on_gui_thread():
                seen["indexed"].append(len(text))
            super().__init__(text)

    def counting_spans(*args, **kwargs):
        seen["chunk_maps"] += on_gui_thread()
        return real_spans(*args, **kwargs)

    def counting_of_ranges(cls, *args, **kwargs):
        seen["projections"] += on_gui_thread()
        return real_of_ranges(cls, *args, **kwargs)

    for module in (kept_view, text_projection):
        monkeypatch.setattr(module, "Utf16Index", CountingIndex, raising=False)
    for module in (kept_view, selection_map):
        monkeypatch.setattr(module, "chunk_spans", counting_spans, raising=False)
    monkeypatch.setattr(text_projection.TextProjection, "of_ranges", classmethod(counting_of_ranges))
    return seen


@pytest.fixture
def view(qtbot):
    view = kept_view.KeptTokenView()
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.show()
    return view


def editor_chars(view) -> int:
    return view.text.document().characterCount()


def test_a_30_mb_document_loads_with_bounded_gui_thread_work(view, doc, gui_work):
    view.set_document(doc)
    assert editor_chars(view) <= GUI_BOUND
    assert all(n <= GUI_BOUND for n in gui_work["indexed"])
    assert view.segments.count() == 3
    assert view.shown_text().startswith(doc.text[:1000])


def test_a_30_mb_selection_is_mapped_off_the_gui_thread_and_highlighted(view, doc, gui_work, qtbot):
    view.set_document(doc)
    view.set_selection(doc, big_selection(len(doc.text)))
    qtbot.waitUntil(lambda: bool(view.spans), timeout=60000)
    assert gui_work["chunk_maps"] == 0
    assert editor_chars(view) <= GUI_BOUND
    assert all(n <= GUI_BOUND for n in gui_work["indexed"])
    shown = view.highlighted_ranges()
    assert shown, "nothing highlighted on the first page"
    kept = view.kept_ranges()
    assert all(any(s <= a and b <= e for s, e in kept) for a, b in shown)
    assert "Kept" in view.summary.text()


def test_jumps_reach_the_end_of_a_30_mb_document(view, doc, gui_work, qtbot):
    view.set_document(doc)
    target = len(doc.text) - 5000
    view.jump_to_offset(target)
    assert view.cursor_doc_offset() == target
    assert editor_chars(view) <= GUI_BOUND
    view.jump_to_segment(1)
    assert view.cursor_doc_offset() == doc.segments[1].start
    assert view.location.text().startswith("page 2")


def test_dropped_only_on_a_30_mb_document_is_prepared_off_the_gui_thread(view, doc, gui_work, qtbot):
    view.set_selection(doc, big_selection(len(doc.text)))
    qtbot.waitUntil(lambda: view.dropped_toggle.isEnabled(), timeout=60000)
    view.dropped_toggle.click()
    qtbot.waitUntil(lambda: "kept characters not shown" in view.shown_text(), timeout=60000)
    assert gui_work["projections"] == 0
    assert editor_chars(view) <= GUI_BOUND
    assert all(n <= GUI_BOUND for n in gui_work["indexed"])
