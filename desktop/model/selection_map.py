"""Map the draft's chunk selection (prompt tokens) onto character ranges of the document.

Qt-free so it can be tested on its own. A chunk covers tokens
[chunk_starts[i], chunk_starts[i+1]); token k starts at prompt char
token_char_offsets[k]; the document sits at doc_char_span inside the prompt, so
doc_offset = prompt_offset - doc_char_span[0]. Chunks outside the document
(system prompt, question) are left out.

Mapping a selection costs Python work per chunk (a 30 MB document has hundreds of
thousands), so the kept-token view runs `layout_selection` on a worker for big documents.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.api import Selection

Range = tuple[int, int]


@dataclass(frozen=True)
class ChunkSpan:
    index: int
    start: int  # document char offset, inclusive
    end: int  # exclusive
    score: float
    importance: float  # score scaled to [0, 1] over the document's chunks
    kept: bool
    protected: bool
    shade: float = 0.0  # score scaled to [0, 1] within its group (kept or dropped), for colouring


@dataclass(frozen=True)
class SelectionLayout:
    """A selection mapped onto one document: everything the kept-token view shows of it."""

    spans: list[ChunkSpan]
    span_starts: list[int]  # spans[i].start, for bisection
    kept: list[Range]  # merged
    dropped: list[Range]
    coverage: list[float]  # per segment (page, section or file): the share kept
    kept_chars: int
    kept_chunks: int
    protected_chunks: int


def layout_selection(selection: Selection, doc_length: int, segments: Sequence[Range]) -> SelectionLayout:
    spans = chunk_spans(selection, doc_length)
    kept = kept_ranges(spans)
    return SelectionLayout(
        spans=spans,
        span_starts=[s.start for s in spans],
        kept=kept,
        dropped=complement(kept, doc_length),
        coverage=segment_coverage(kept, segments),
        kept_chars=sum(end - start for start, end in kept),
        kept_chunks=sum(1 for s in spans if s.kept),
        protected_chunks=sum(1 for s in spans if s.protected),
    )


def chunk_spans(selection: Selection, doc_length: int) -> list[ChunkSpan]:
    """Every chunk that overlaps the document, clipped to it, in document order."""
    kept = set(selection.kept_chunks)
    protected = set(selection.protected_chunks)
    raw: list[tuple[int, int, int]] = []
    for i in range(len(selection.chunk_starts)):
        start, end = _chunk_doc_range(selection, i)
        start, end = max(start, 0), min(end, doc_length)
        if start < end:
            raw.append((i, start, end))
    scores = [selection.chunk_scores[i] for i, _, _ in raw]
    spans = [
        ChunkSpan(i, start, end, selection.chunk_scores[i], importance, i in kept, i in protected)
        for (i, start, end), importance in zip(raw, _scaled(scores))
    ]
    return _with_shades(spans)


def _with_shades(spans: list[ChunkSpan]) -> list[ChunkSpan]:
    """Kept chunks all sit above the cut, so scaled over every chunk they would look alike:
    scale each group (kept by score, dropped) over its own range instead."""
    groups = {
        "kept": [k for k, s in enumerate(spans) if s.kept and not s.protected],
        "dropped": [k for k, s in enumerate(spans) if not s.kept],
    }
    shades = {k: 1.0 for k, s in enumerate(spans) if s.protected}
    for members in groups.values():
        shades.update(zip(members, _scaled([spans[k].score for k in members])))
    return [replace(s, shade=shades.get(k, 1.0)) for k, s in enumerate(spans)]


def _chunk_doc_range(selection: Selection, i: int) -> Range:
    offsets = selection.token_char_offsets
    first = selection.chunk_starts[i]
    if i + 1 < len(selection.chunk_starts):
        after = selection.chunk_starts[i + 1]
    else:
        after = min(first + selection.chunk_size, len(offsets))
    start = offsets[first] if first < len(offsets) else selection.doc_char_span[1]
    # Past the last token the prompt's end is unknown; the document end bounds it well enough.
    end = offsets[after] if after < len(offsets) else max(selection.doc_char_span[1], start + 1)
    shift = selection.doc_char_span[0]
    return start - shift, end - shift


def _scaled(scores: Sequence[float]) -> list[float]:
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high - low <= 1e-12:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def merge_ranges(ranges: Sequence[Range]) -> list[Range]:
    """Sorted, with touching or overlapping ranges joined."""
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def kept_ranges(spans: Sequence[ChunkSpan]) -> list[Range]:
    return merge_ranges([(s.start, s.end) for s in spans if s.kept])


def complement(ranges: Sequence[Range], length: int) -> list[Range]:
    """The parts of [0, length) that `ranges` (merged) do not cover."""
    gaps, pos = [], 0
    for start, end in ranges:
        if start > pos:
            gaps.append((pos, start))
        pos = max(pos, end)
    if pos < length:
        gaps.append((pos, length))
    return gaps


def segment_coverage(ranges: Sequence[Range], spans: Sequence[Range]) -> list[float]:
    """For each span (a page, section or file), the share the merged `ranges` cover."""
    ends = [r[1] for r in ranges]
    return [_covered(ranges, ends, start, end) for start, end in spans]


def covered_fraction(ranges: Sequence[Range], start: int, end: int) -> float:
    """How much of [start, end) the merged `ranges` cover."""
    return _covered(ranges, [r[1] for r in ranges], start, end)


def _covered(ranges: Sequence[Range], ends: list[int], start: int, end: int) -> float:
    if end <= start:
        return 0.0
    covered, i = 0, bisect.bisect_right(ends, start)  # the first range that ends after `start`
    while i < len(ranges) and ranges[i][0] < end:
        covered += min(end, ranges[i][1]) - max(start, ranges[i][0])
        i += 1
    return covered / (end - start)
