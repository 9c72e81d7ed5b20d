"""Chunk token ranges -> document char ranges, and the view/document/UTF-16 offset maps."""

from __future__ import annotations

from desktop.model.selection_map import chunk_spans, complement, covered_fraction, kept_ranges, merge_ranges
from desktop.model.text_projection import TextProjection, Utf16Index
from engine.core.events import Selection


def selection_for(offsets, starts, scores, kept, protected=(), doc_span=(10, 50), chunk_size=2):
    return Selection(
        chunk_size=chunk_size,
        chunk_starts=list(starts),
        chunk_scores=list(scores),
        kept_chunks=list(kept),
        protected_chunks=list(protected),
        token_char_offsets=list(offsets),
        doc_char_span=doc_span,
    )


def test_chunks_map_to_document_offsets_and_outside_chunks_are_dropped():
    # Tokens every 5 prompt chars; the document is prompt[10:50]; chunks of 2 tokens.
    sel = selection_for(
        offsets=range(0, 60, 5),
        starts=[0, 2, 4, 6, 8, 10],
        scores=[9, 1, 5, 3, 2, 7],
        kept=[0, 2, 5],
        protected=[0, 5],
    )
    spans = chunk_spans(sel, doc_length=40)
    # chunk 0 covers prompt [0,10): before the document, so it is left out; chunk 5 covers [50,60): after it.
    assert [(s.index, s.start, s.end) for s in spans] == [(1, 0, 10), (2, 10, 20), (3, 20, 30), (4, 30, 40)]
    assert [s.kept for s in spans] == [False, True, False, False]
    # Importance is scaled over the document's chunks only: scores 1..5 -> 0..1.
    assert [round(s.importance, 2) for s in spans] == [0.0, 1.0, 0.5, 0.25]


def test_a_chunk_straddling_the_document_edge_is_clipped():
    sel = selection_for(offsets=range(0, 60, 5), starts=[0, 3, 6, 9], scores=[1, 2, 3, 4], kept=[0, 3])
    spans = chunk_spans(sel, doc_length=40)
    assert (spans[0].index, spans[0].start, spans[0].end) == (0, 0, 5)  # prompt [0,15) -> doc [0,5)
    assert (spans[-1].index, spans[-1].start, spans[-1].end) == (
        3,
        35,
        40,
    )  # prompt [45,..) clipped at doc end
    assert kept_ranges(spans) == [(0, 5), (35, 40)]


def test_merge_complement_and_coverage():
    assert merge_ranges([(5, 8), (0, 2), (2, 4), (7, 9)]) == [(0, 4), (5, 9)]
    assert complement([(0, 4), (5, 9)], 12) == [(4, 5), (9, 12)]
    assert complement([], 3) == [(0, 3)]
    assert covered_fraction([(0, 4), (5, 9)], 2, 6) == 0.75
    assert covered_fraction([(0, 4)], 10, 20) == 0.0


def test_projection_of_ranges_maps_both_ways():
    text = "0123456789abcdefghij"
    proj = TextProjection.of_ranges(text, [(2, 5), (10, 12)], lambda n: f"<{n}>")
    assert proj.text == "<2>234<5>ab<8>"
    assert proj.markers == [(0, 3), (6, 9), (11, 14)]
    assert proj.to_view(3) == 4
    assert proj.to_view(7) == 9  # hidden: the next shown text
    assert proj.to_doc(4) == 3
    assert proj.to_doc(7) is None  # on a marker
    assert proj.doc_ranges(0, len(proj.text)) == [(2, 5), (10, 12)]


def test_utf16_index_counts_astral_characters_twice():
    text = "a𝑥b😀c"
    index = Utf16Index(text)
    assert [index.to_qt(i) for i in range(len(text) + 1)] == [0, 1, 3, 4, 6, 7]
    assert [index.to_py(q) for q in (0, 1, 3, 4, 6, 7)] == [0, 1, 2, 3, 4, 5]


def test_shades_spread_within_kept_and_within_dropped():
    # Kept scores 7 and 9 sit at the top of the document's range; their shades still span 0..1.
    sel = selection_for(
        offsets=range(0, 60, 5), starts=[2, 4, 6, 8], scores=[1, 7, 9, 4], kept=[1, 2], doc_span=(10, 50)
    )
    spans = chunk_spans(sel, doc_length=40)
    by_index = {s.index: s for s in spans}
    assert (by_index[1].shade, by_index[2].shade) == (0.0, 1.0)
    assert (by_index[0].shade, by_index[3].shade) == (0.0, 1.0)
    assert by_index[1].importance > 0.7
