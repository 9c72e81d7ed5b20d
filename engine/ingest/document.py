"""The document model every ingester produces."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

DocKind = Literal["pdf", "text", "folder"]
SegmentKind = Literal["page", "file", "section", "text"]


@dataclass(frozen=True)
class Segment:
    """A page of a PDF, a file of a folder or a section of a text file, as a span of Document.text."""

    label: str  # "page 3", "src/pkg/mod.py" or a section's heading
    kind: SegmentKind
    start: int  # char offset in Document.text, inclusive
    end: int  # exclusive


@dataclass
class Document:
    path: Path
    kind: DocKind
    text: str
    segments: list[Segment]
    warnings: list[str] = field(default_factory=list)

    @property
    def n_chars(self) -> int:
        return len(self.text)

    def segment_at(self, offset: int) -> Segment | None:
        """The segment that holds char `offset`, or None between segments."""
        starts = [s.start for s in self.segments]
        i = bisect.bisect_right(starts, offset) - 1
        if i >= 0 and self.segments[i].start <= offset < self.segments[i].end:
            return self.segments[i]
        return None
