"""The draft reads prompts longer than it was trained for, one segment at a time.

A prompt is a head (system turn, user header), the document, and a tail (question, assistant
header). One longer than the draft's trained window is scored as segments: the head, one slice
of the document, and the tail, each segment inside the window (look-ahead included). No position
goes past what the draft was trained on, the cost stays linear in the document, and memory stays
that of one segment.

Comparable scores: a look-ahead query's softmax spreads over its own segment's keys only, so each
segment's scores are multiplied by its length (1.0 is then uniform attention in any segment), and
the slices are cut equal anyway. The head's and the tail's scores are averaged over the segments.

Follow-up questions: a segment's head and slice are the same for every question about the document
(in a session the slices are planned with the question's room rounded up), so a `SegmentCache` can keep their
keys and values like a one-pass prompt's prefix. The segments it holds are scored first, before the
ones it must fill evict them.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.steps import Steps, map_steps
from engine.draft.scorer import DraftPrefix, DraftScorer, ScoreResult, ScoringParams

TAIL_ROOM_STEP = (
    256  # the question's room in a segment, rounded up: questions of about one length share a plan
)

Piece = tuple[int, int]


class SegmentCache(Protocol):
    """The draft's kept keys for segments' heads and slices (engine.pipeline.draft_cache)."""

    def holds(self, piece: Piece, prefix: list[int]) -> bool: ...

    def prefix_for(self, piece: Piece, prefix: list[int]) -> DraftPrefix | None: ...

    def keep(self, piece: Piece, prefix: DraftPrefix) -> bool: ...


def plan_segments(
    n_tokens: int, doc_span: tuple[int, int], max_len: int, follow_ups: bool = False
) -> list[Piece]:
    """The document slices [start, end) to score one by one: one slice (the whole document) when the
    prompt fits in `max_len`, else as few equal slices as keep head + slice + tail within it.
    `follow_ups`: the tail's room is rounded up, so that other questions get the same slices."""
    start, end = doc_span
    if n_tokens <= max_len or end <= start:
        return [(start, end)]
    fixed = n_tokens - (end - start)
    tail = n_tokens - end
    room = max_len - fixed
    if room < 1:
        raise ValueError(
            f"the prompt's template and question ({fixed} tokens) leave no room "
            f"for the document in the draft's {max_len}-token window"
        )
    if follow_ups:
        room -= min(-tail % TAIL_ROOM_STEP, room // 32)  # a small window keeps nearly all its room
    n_segments = math.ceil((end - start) / room)
    size = math.ceil((end - start) / n_segments)
    return [(a, min(a + size, end)) for a in range(start, end, size)]


def segment_prefix(tokens: list[int], doc_span: tuple[int, int], piece: Piece) -> list[int]:
    """Head + one document slice: the part of a segment every question about the document shares."""
    return tokens[: doc_span[0]] + tokens[piece[0] : piece[1]]


def segment_tokens(tokens: list[int], doc_span: tuple[int, int], piece: tuple[int, int]) -> list[int]:
    """Head + one document slice + tail."""
    start, end = doc_span
    return tokens[:start] + tokens[piece[0] : piece[1]] + tokens[end:]


def iter_score_segments(
    scorer: DraftScorer,
    tokens: list[int],
    doc_span: tuple[int, int],
    pass_tokens: int,
    params: ScoringParams = ScoringParams(),
    cancel: CancelToken = NEVER,
    cache: SegmentCache | None = None,
) -> Steps[ScoreResult]:
    """Yields (tokens scored, total) as the segments go; returns the whole prompt's scores.

    `pass_tokens`: the longest prompt one pass may score (its look-ahead steps come on top).
    `cache`: the segments' kept keys (a follow-up question), filled as they are scored."""
    pieces = plan_segments(len(tokens), doc_span, pass_tokens, follow_ups=cache is not None)
    if len(pieces) == 1:
        return (yield from scorer.iter_score(tokens, params, cancel, split=doc_span[1]))
    start, end = doc_span
    n_head, n_tail = start, len(tokens) - end
    total = sum(b - a + n_head + n_tail for a, b in pieces)
    importance = np.zeros(len(tokens), dtype=np.float64)
    head_tail = np.zeros(n_head + n_tail, dtype=np.float64)
    done, results = 0, {}
    for piece in cached_first(pieces, tokens, doc_span, cache):
        segment = segment_tokens(tokens, doc_span, piece)
        width = piece[1] - piece[0]
        prefix = (
            cache.prefix_for(piece, segment_prefix(tokens, doc_span, piece)) if cache is not None else None
        )
        result = yield from map_steps(
            scorer.iter_score(segment, params, cancel, prefix, split=n_head + width),
            lambda seg_done, _, before=done: (before + seg_done, total),
        )
        if prefix is not None:
            cache.keep(piece, prefix)
        del prefix  # one segment's keys in memory at a time, beyond what the cache keeps
        scaled = result.importance * len(segment)
        importance[piece[0] : piece[1]] = scaled[n_head : n_head + width]
        head_tail += np.concatenate([scaled[:n_head], scaled[n_head + width :]])
        done += len(segment)
        results[piece] = result
    head_tail /= len(pieces)
    importance[:start], importance[end:] = head_tail[:n_head], head_tail[n_head:]
    first = results[pieces[0]]
    return ScoreResult(
        importance=importance,
        lookahead_tokens=first.lookahead_tokens,
        steps=first.steps,
        reused_prefix=sum(r.reused_prefix for r in results.values()),
        segments=len(pieces),
    )


def cached_first(
    pieces: list[Piece], tokens: list[int], doc_span: tuple[int, int], cache: SegmentCache | None
) -> list[Piece]:
    """The pieces in the order to score them: those the cache holds first, so that filling the
    others cannot evict them before they are used."""
    if cache is None:
        return pieces
    return sorted(pieces, key=lambda piece: not cache.holds(piece, segment_prefix(tokens, doc_span, piece)))
