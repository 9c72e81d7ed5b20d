"""Character spans of tokens, and back: how a selection made on one tokenizer's tokens reaches
another tokenizer's tokens of the same text.

A token's span is [start, end) in the text's characters: from the character holding its first
byte to the one after the character holding its last byte. A token that holds only part of a
character's bytes (byte-level BPE splits an emoji or a CJK character this way) spans that whole
character, so two neighbours may share one; a token with no bytes spans nothing, (c, c).
Pure numpy, no tokenizer: the callers pass each token's byte length.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Spans = np.ndarray  # int64, shape (n, 2): [start, end) character offsets


def char_index_of_bytes(text: str) -> np.ndarray:
    """For each byte of the text's UTF-8, the index of the character it belongs to."""
    byte_len = np.fromiter((len(ch.encode("utf-8")) for ch in text), dtype=np.int64, count=len(text))
    return np.repeat(np.arange(len(text), dtype=np.int64), byte_len)


def token_char_spans(text: str, byte_lengths: Sequence[int]) -> Spans:
    """Each token's character span in `text`, the tokens' bytes read in order from its start.

    Bytes past the text's end (a tokenizer that adds what the text lacks) are clipped to it."""
    char_at = char_index_of_bytes(text)
    lengths = np.asarray(byte_lengths, dtype=np.int64).reshape(-1)
    if not len(lengths):
        return np.zeros((0, 2), dtype=np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    n_bytes = len(char_at)
    # A lookup one past the last byte is the text's end; the sentinel makes it one array read.
    lookup = np.concatenate([char_at, [len(text)]])
    first = lookup[np.minimum(starts, n_bytes)]
    last = np.where(lengths > 0, lookup[np.clip(ends - 1, 0, n_bytes)] + 1, first)
    last = np.minimum(last, len(text))
    return np.stack([first, np.maximum(first, last)], axis=1)


def merge_spans(spans: Sequence[tuple[int, int]] | Spans) -> Spans:
    """The union of spans as disjoint, ascending spans; touching ones join, empty ones go."""
    arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    arr = arr[arr[:, 1] > arr[:, 0]]
    if not len(arr):
        return np.zeros((0, 2), dtype=np.int64)
    arr = arr[np.argsort(arr[:, 0], kind="stable")]
    merged = [list(arr[0])]
    for start, end in arr[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return np.asarray(merged, dtype=np.int64)


def spans_of_tokens(token_spans: Spans, token_idx: Sequence[int] | np.ndarray) -> Spans:
    """The characters the given tokens cover, as merged spans."""
    idx = np.asarray(token_idx, dtype=np.int64)
    return merge_spans(np.asarray(token_spans, dtype=np.int64)[idx])


def clip_spans(spans: Spans, lo: int, hi: int) -> Spans:
    """The parts of the spans inside [lo, hi)."""
    arr = np.clip(np.asarray(spans, dtype=np.int64).reshape(-1, 2), lo, hi)
    return arr[arr[:, 1] > arr[:, 0]]


def tokens_overlapping(token_spans: Spans, spans: Spans, n_chars: int) -> np.ndarray:
    """Indices (ascending) of the tokens whose span shares a character with one of `spans`; a token
    with an empty span counts when its place lies inside one."""
    token_spans = np.asarray(token_spans, dtype=np.int64).reshape(-1, 2)
    kept = np.zeros(n_chars + 1, dtype=np.int64)  # +1: an empty token may sit at the very end
    for start, end in clip_spans(spans, 0, n_chars):
        kept[start:end] = 1
    covered = np.concatenate([[0], np.cumsum(kept)])  # covered[c]: kept characters before c
    starts, ends = token_spans[:, 0], token_spans[:, 1]
    inside = covered[ends] - covered[starts] > 0
    empty_inside = (ends == starts) & (kept[np.minimum(starts, n_chars)] > 0)
    return np.flatnonzero(inside | empty_inside)


def shift_spans(spans: Spans, offset: int) -> Spans:
    """The spans moved by `offset` characters (from one text's coordinates to another's)."""
    return np.asarray(spans, dtype=np.int64).reshape(-1, 2) + int(offset)
