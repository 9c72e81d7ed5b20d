"""The draft reads prompts longer than it was trained for, one segment at a time.

A prompt is a head (system turn, user header), the document, and a tail (question, assistant
header). One longer than the draft's trained window is scored as segments: the head, one slice
of the document, and the tail, each segment inside the window (look-ahead included). No position
goes past what the draft was trained on, the cost stays linear in the document, and memory stays
that of one segment.

Comparable scores: a look-ahead query's softmax spreads over its own segment's keys only, so each
segment's scores are multiplied by its length (1.0 is then uniform attention in any segment), and
the slices are cut equal anyway. The head's and the tail's scores are averaged over the segments.
"""

from __future__ import annotations

import math

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.settings import RunSettings
from engine.core.steps import Steps, map_steps
from engine.draft.scorer import DraftScorer, ScoreResult


def plan_segments(n_tokens: int, doc_span: tuple[int, int], max_len: int) -> list[tuple[int, int]]:
    """The document slices [start, end) to score one by one: one slice (the whole document) when the
    prompt fits in `max_len`, else as few equal slices as keep head + slice + tail within it."""
    start, end = doc_span
    if n_tokens <= max_len or end <= start:
        return [(start, end)]
    room = max_len - (n_tokens - (end - start))
    if room < 1:
        raise ValueError(f"the prompt's template and question ({n_tokens - (end - start)} tokens) leave no room "
                         f"for the document in the draft's {max_len}-token window")
    n_segments = math.ceil((end - start) / room)
    size = math.ceil((end - start) / n_segments)
    return [(a, min(a + size, end)) for a in range(start, end, size)]


def segment_tokens(tokens: list[int], doc_span: tuple[int, int], piece: tuple[int, int]) -> list[int]:
    """Head + one document slice + tail."""
    start, end = doc_span
    return tokens[:start] + tokens[piece[0]:piece[1]] + tokens[end:]


def iter_score_segments(scorer: DraftScorer, tokens: list[int], doc_span: tuple[int, int], pass_tokens: int,
                        lookahead: int = RunSettings.lookahead, kernel: int = RunSettings.kernel,
                        cancel: CancelToken = NEVER, window: int = 0) -> Steps[ScoreResult]:
    """Yields (tokens scored, total) as the segments go; returns the whole prompt's scores.

    `pass_tokens`: the longest prompt one pass may score (its look-ahead steps come on top)."""
    pieces = plan_segments(len(tokens), doc_span, pass_tokens)
    if len(pieces) == 1:
        return (yield from scorer.iter_score(tokens, lookahead, kernel, cancel, window))
    start, end = doc_span
    n_head, n_tail = start, len(tokens) - end
    total = sum(b - a + n_head + n_tail for a, b in pieces)
    importance = np.zeros(len(tokens), dtype=np.float64)
    head_tail = np.zeros(n_head + n_tail, dtype=np.float64)
    done, first = 0, None
    for piece in pieces:
        segment = segment_tokens(tokens, doc_span, piece)
        result = yield from map_steps(scorer.iter_score(segment, lookahead, kernel, cancel, window),
                                      lambda seg_done, _, before=done: (before + seg_done, total))
        scaled = result.importance * len(segment)
        width = piece[1] - piece[0]
        importance[piece[0]:piece[1]] = scaled[n_head:n_head + width]
        head_tail += np.concatenate([scaled[:n_head], scaled[n_head + width:]])
        done += len(segment)
        first = first or result
    head_tail /= len(pieces)
    importance[:start], importance[end:] = head_tail[:n_head], head_tail[n_head:]
    return ScoreResult(importance=importance, lookahead_tokens=first.lookahead_tokens, steps=first.steps,
                       segments=len(pieces))

