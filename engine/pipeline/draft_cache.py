"""The draft's keys and values for documents' prefixes, kept in memory under a byte cap.

A follow-up SpecPrefill on the same document then runs the draft over its question and the
look-ahead steps only (engine.draft.scorer.DraftPrefix). In fp32 on the CPU the default draft
(24 layers, 2 KV heads of 64) keeps 24 KiB per token: 8K tokens 0.2 GB, 16K 0.4 GB, 32K 0.8 GB.
Least recently used prefixes go first; one larger than the whole cap is not kept.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from engine.draft.scorer import DraftPrefix
from engine.pipeline.session import PrefixKey

_Slot = tuple[PrefixKey, int]  # the prefix's key and the draft window it was computed with


class DraftCaches:
    def __init__(self, cap: int):
        self.cap = cap
        self._entries: OrderedDict[_Slot, DraftPrefix] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.cap > 0

    def total_bytes(self) -> int:
        return sum(entry.nbytes() for entry in self._entries.values())

    def prefix_for(self, key: PrefixKey, prefix: np.ndarray, window: int) -> DraftPrefix | None:
        """The kept prefix when its tokens match (now the most recently used), else an empty one
        for the scorer to fill; None when the cache is off."""
        if not self.enabled:
            return None
        entry = self._entries.get((key, window))
        if entry is not None and np.array_equal(entry.tokens, prefix):
            self._entries.move_to_end((key, window))
            return entry
        return DraftPrefix(np.array(prefix, copy=True), window)

    def keep(self, key: PrefixKey, entry: DraftPrefix) -> bool:
        """Keep a filled prefix, dropping the least recently used ones beyond the cap; False when
        it is empty or larger than the whole cap (then it is not kept)."""
        slot = (key, entry.window)
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
