"""The draft's keys and values for documents' prefixes, kept in memory under a byte cap.

A follow-up SpecPrefill on the same document then runs the draft over its question and the
look-ahead steps only (engine.draft.scorer.DraftPrefix). In fp32 on the CPU the default draft
(24 layers, 2 KV heads of 64) keeps 24 KiB per token: 8K tokens 0.2 GB, 16K 0.4 GB, 32K 0.8 GB.
Least recently used prefixes go first; one larger than the whole cap is not kept.

A document longer than the draft's window is scored in segments (engine.draft.segments): each
segment's head and slice is kept as a prefix of its own, under the slice's token span.

A prefix is kept under a DraftKey: the document's PrefixKey and the tokens the draft reads it in,
the target's (one vocabulary) or its own (a draft of another family, engine.pipeline.span_selection).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

import numpy as np

from engine.draft.scorer import DraftPrefix
from engine.draft.segments import Piece, segment_prefix
from engine.pipeline.session import PrefixKey

WHOLE: Piece = (0, 0)  # the part of a prefix scored in one pass: all of it
DraftTokens = Literal["target", "draft"]


@dataclass(frozen=True)
class DraftKey:
    """What a draft prefix's keys and values are for, besides its tokens: the document's prefix key
    (document, both models by content, system prompt, context) and whose tokenization its tokens
    are, "target" (a draft of the target's vocabulary) or "draft" (the draft's own, the span path).
    The same document's prefix has other token ids in each: one never stands for the other."""

    prefix: PrefixKey
    tokens: DraftTokens = "target"

    @property
    def document_sha256(self) -> str:
        return self.prefix.document_sha256


# the prefix's key, the draft window it was computed with, and its segment's slice (WHOLE: none)
_Slot = tuple[DraftKey, int, Piece]


class DraftCaches:
    def __init__(self, cap: int):
        self.cap = cap
        self._entries: OrderedDict[_Slot, DraftPrefix] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.cap > 0

    def total_bytes(self) -> int:
        return sum(entry.nbytes() for entry in self._entries.values())

    def holds(self, key: DraftKey, prefix: np.ndarray, window: int, part: Piece = WHOLE) -> bool:
        """Whether a filled prefix with these tokens is kept (its place in the order unchanged)."""
        entry = self._entries.get((key, window, part))
        return entry is not None and entry.complete and np.array_equal(entry.tokens, prefix)

    def prefix_for(
        self, key: DraftKey, prefix: np.ndarray, window: int, part: Piece = WHOLE
    ) -> DraftPrefix | None:
        """The kept prefix when its tokens match (now the most recently used), else an empty one
        for the scorer to fill; None when the cache is off."""
        if not self.enabled:
            return None
        slot = (key, window, part)
        entry = self._entries.get(slot)
        if entry is not None and np.array_equal(entry.tokens, prefix):
            self._entries.move_to_end(slot)
            return entry
        return DraftPrefix(np.array(prefix, copy=True), window)

    def keep(self, key: DraftKey, entry: DraftPrefix, part: Piece = WHOLE) -> bool:
        """Keep a filled prefix, dropping the least recently used ones beyond the cap; False when
        it is empty or larger than the whole cap (then it is not kept)."""
        slot = (key, entry.window, part)
        if entry.cache is None or entry.nbytes() > self.cap:
            self._entries.pop(slot, None)
            return False
        self._entries[slot] = entry
        self._entries.move_to_end(slot)
        while self.total_bytes() > self.cap:
            self._entries.popitem(last=False)
        return True

    def drop(self, document_sha256: str) -> None:
        """Forget every prefix of one document."""
        for slot in [s for s in self._entries if s[0].document_sha256 == document_sha256]:
            del self._entries[slot]


@dataclass
class DocumentSegments:
    """One document's segments in the cache, at one draft window (engine.draft.segments.SegmentCache)."""

    caches: DraftCaches
    key: DraftKey
    window: int

    def holds(self, piece: Piece, prefix: list[int]) -> bool:
        return self.caches.holds(self.key, np.asarray(prefix), self.window, piece)

    def prefix_for(self, piece: Piece, prefix: list[int]) -> DraftPrefix | None:
        return self.caches.prefix_for(self.key, np.asarray(prefix), self.window, piece)

    def keep(self, piece: Piece, prefix: DraftPrefix) -> bool:
        return self.caches.keep(self.key, prefix, piece)

    def count_held(self, pieces: list[Piece], tokens: list[int], doc_span: tuple[int, int]) -> int:
        """How many of a prompt's segments the cache holds."""
        return sum(self.holds(piece, segment_prefix(tokens, doc_span, piece)) for piece in pieces)
