"""One request's selection: the keep (fixed, or auto from the draft's scores), the definitions and
files the question names first, coverage of the document's pages or files for broad questions, then the kept
chunks and tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.core.settings import (
    AUTO_KEEP,
    AUTO_KEEP_BROAD,
    AUTO_KEEP_CEILING,
    AUTO_KEEP_FLOOR,
    AUTO_KEEP_JOINED,
    AUTO_LONG_LOOKUP_TOKENS,
    RunSettings,
)
from engine.draft.keep_policy import choose_keep, is_broad_question
from engine.draft.question_words import bm25_chunk_scores, chunk_texts
from engine.draft.selection import plan_selection, scored_chunks
from engine.ingest.document import Segment
from engine.llama.prompt import PreparedPrompt
from engine.pipeline.named_definitions import Definition, named_definitions
from engine.pipeline.named_files import named_files


@dataclass(frozen=True)
class SelectionPlan:
    scores: np.ndarray  # per chunk
    protected: list[int]
    kept: list[int]  # chunk indices, ascending
    kept_idx: np.ndarray  # token indices, ascending
    keep: float  # the keep that ran (auto's choice, or the fixed one)
    keep_reason: str  # why auto chose it; "" for a fixed keep
    covered_parts: int  # pages, sections or files covered first; 0 when coverage was off
    focused_parts: tuple[str, ...] = ()  # the definitions and files the question names, kept first


def segment_token_parts(
    segments: Sequence[Segment], offsets: Sequence[int], doc_start_char: int, doc_token_span: tuple[int, int]
) -> list[tuple[int, int]]:
    """Each segment's token range in the prompt, the empty ones left out (char_token_spans)."""
    spans = char_token_spans(
        [(seg.start, seg.end) for seg in segments], offsets, doc_start_char, doc_token_span
    )
    return [(a, b) for a, b in spans if b > a]


def char_token_spans(
    char_spans: Sequence[tuple[int, int]],
    offsets: Sequence[int],
    doc_start_char: int,
    doc_token_span: tuple[int, int],
) -> list[tuple[int, int]]:
    """Each document char span's token range in the prompt: its chars shifted by where the document
    starts in the prompt text, found among the tokens' start offsets (within the document's tokens);
    (a, a) when it holds no token."""
    starts = np.asarray(offsets, dtype=np.int64)
    lo, hi = doc_token_span
    spans = []
    for start, end in char_spans:
        a = max(int(np.searchsorted(starts, doc_start_char + start, side="left")), lo)
        b = min(int(np.searchsorted(starts, doc_start_char + end, side="left")), hi)
        spans.append((a, max(a, b)))
    return spans


def wants_coverage(settings: RunSettings, question: str) -> bool:
    return settings.coverage == "on" or (settings.coverage == "auto" and is_broad_question(question))


def focused_segments(question: str, segments: Sequence[Segment]) -> list[Segment]:
    """The files the question names, unless they are the whole document."""
    named = named_files(question, segments)
    return [segments[i] for i in named] if len(named) < len(segments) else []


Labelled = tuple[tuple[str, tuple[int, int]], ...]  # (label, token range [a, b)) of what a question names


@dataclass(frozen=True)
class WantedParts:
    """What one request's selection covers (pages, sections or files, for a question that wants coverage) and keeps
    first (the files and definitions the question names), in the document's chars."""

    covered: Sequence[Segment] = ()
    files: Sequence[Segment] = ()
    definitions: Sequence[Definition] = ()

    def __bool__(self) -> bool:
        return bool(self.covered or self.files or self.definitions)

    def in_tokens(
        self, offsets: Sequence[int], doc_start_char: int, doc_token_span: tuple[int, int]
    ) -> tuple[list[tuple[int, int]], Labelled, Labelled]:
        """The covered parts' token ranges, and the named files' and definitions' labelled ranges."""

        def labelled(items) -> Labelled:
            spans = char_token_spans(
                [(item.start, item.end) for item in items], offsets, doc_start_char, doc_token_span
            )
            return tuple((item.label, (a, b)) for item, (a, b) in zip(items, spans) if b > a)

        covered = segment_token_parts(self.covered, offsets, doc_start_char, doc_token_span)
        return covered, labelled(self.files), labelled(self.definitions)


def wanted_parts(
    settings: RunSettings, question: str, document: str, segments: Sequence[Segment]
) -> WantedParts:
    """What the selection of this question about this document covers and keeps first."""
    several = len(segments) > 1
    covered = segments if several and wants_coverage(settings, question) else ()
    if not (several and settings.named_files == "auto"):  # focus is off, or there is one part only
        return WantedParts(covered)
    return WantedParts(
        covered, focused_segments(question, segments), named_definitions(question, document, segments)
    )


def focus_notice(labels: Sequence[str]) -> str:
    """ "the question names src/pkg/a.py: its best chunks were kept first"."""
    its = "its" if len(labels) == 1 else "their"
    return f"the question names {', '.join(labels)}: {its} best chunks were kept first"


def question_word_scores(prompt: PreparedPrompt, offsets: Sequence[int], chunk_size: int) -> np.ndarray:
    """Each chunk's BM25 match with the question's words; the question's own chunks get 0."""
    return bm25_chunk_scores(
        chunk_texts(prompt.parts.text, offsets, chunk_size),
        prompt.parts.question,
        prompt.tail_start // chunk_size,
    )


def long_lookup_tokens(budget: int | None) -> int | None:
    """The prompt length from which auto gives a look-up the floor: only for prompts that fit the
    target's window (`budget` None), where it was measured; past it a 48K needle at 0.1 was lost
    (keep 0.2 found it), so the spread's keep stays."""
    return AUTO_LONG_LOOKUP_TOKENS if budget is None else None


def plan_request_selection(
    importance: np.ndarray,
    prompt: PreparedPrompt,
    settings: RunSettings,
    budget: int | None,
    parts: list[tuple[int, int]],
    offsets: Sequence[int],
    focus: Labelled = (),
    definitions: Labelled = (),
    chunked: tuple[np.ndarray, list[int]] | None = None,
) -> SelectionPlan:
    """The keep, then the selection; `parts` (segment_token_parts, given only when the question wants
    coverage) are covered when there is more than one of them; `definitions` and `focus` (each named
    definition's and file's label and token range) are kept first, in that order. `offsets` (each
    token's char offset in the prompt text) give the chunks' words for settings.question_words; the
    keep=auto choice reads the draft's scores alone. The chunk scores and protected chunks are computed
    once, here or by the caller (`chunked`: scored_chunks of `importance`), for the keep and the selection."""
    question = prompt.parts.question
    keep, reason = settings.keep, ""
    if chunked is None:
        chunked = scored_chunks(importance, settings.chunk_size, prompt.tail_start)
    if keep == AUTO_KEEP:
        choice = choose_keep(
            *chunked,
            question,
            AUTO_KEEP_FLOOR,
            AUTO_KEEP_CEILING,
            broad_keep=AUTO_KEEP_BROAD,
            joined_keep=AUTO_KEEP_JOINED,
            prompt_tokens=len(importance),
            long_tokens=long_lookup_tokens(budget),
        )
        keep, reason = choice.keep, choice.reason
    covered = parts if len(parts) > 1 else []
    words = (
        question_word_scores(prompt, offsets, settings.chunk_size) if settings.question_words > 0 else None
    )
    scores, protected, kept, kept_idx = plan_selection(
        importance,
        settings.chunk_size,
        float(keep),
        prompt.tail_start,
        budget,
        covered,
        [span for _, span in focus],
        [span for _, span in definitions],
        words,
        settings.question_words,
        chunked,
    )
    return SelectionPlan(
        scores,
        protected,
        kept,
        kept_idx,
        float(keep),
        reason,
        len(covered),
        tuple(label for label, _ in (*definitions, *focus)),
    )
