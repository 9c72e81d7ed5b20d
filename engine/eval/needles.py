"""Needle retrieval in documents longer than the window: one distinct fact at a chosen depth of real text.

The haystack is real documents joined and cut to a token length. Each depth gets its own fact
(a name and a number that appear nowhere else), placed at a line break near that share of the
text. Two measures:
- draft only (`draft_keeps_needle`): does the draft's selection keep the fact's tokens? It compares
  ways for the draft to read past its window (segments, or one pass at positions it was not
  trained on) without paying for the target;
- end to end (`ask_needle`): the answer of a SpecPrefill run and/or the truncated full prefill.

Together (`ask_needles_together`): every depth's fact in one haystack, asked one after another as
follow-up questions in one session, as a user would ask about a document. The other facts are
distractors, and the follow-ups reuse the session's caches (the draft's segments, the cut full
prefix), so a whole row of depths costs little more than one cold run; each row says how it was
served.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.events import RunFinished, RunResult, Selection, SelectionMade
from engine.core.settings import RunSettings
from engine.core.steps import run_to_end
from engine.draft.scorer import ScoringParams
from engine.draft.segments import iter_score_segments
from engine.draft.selection import kept_token_indices
from engine.eval.metrics import is_correct
from engine.llama.prompt import token_char_offsets
from engine.pipeline import DocumentSession, Engine
from engine.pipeline.selection_plan import char_token_spans, plan_request_selection


@dataclass(frozen=True)
class Needle:
    fact: str
    question: str
    answer: str


# One per depth: names and numbers that occur in no sample document.
NEEDLES: tuple[Needle, ...] = (
    Needle(
        "The archive vault of the Halvorsen Institute opens with the access code 7391.",
        "What is the access code of the Halvorsen Institute's archive vault?",
        "7391",
    ),
    Needle(
        "Captain Ilse Marrow logged exactly 4826 nautical miles on her last voyage.",
        "How many nautical miles did Captain Ilse Marrow log on her last voyage?",
        "4826",
    ),
    Needle(
        "The Quillon Bridge in Tarsvik is painted in a colour called saffron teal.",
        "What colour is the Quillon Bridge in Tarsvik painted?",
        "saffron teal",
    ),
    Needle(
        "The Brenwick observatory's main telescope has a mirror 317 centimetres wide.",
        "How wide is the mirror of the Brenwick observatory's main telescope?",
        "317",
    ),
    Needle(
        "Professor Odalys Venn keeps her spare keys in a tin labelled Juniper-58.",
        "What label is on the tin where Professor Odalys Venn keeps her spare keys?",
        "Juniper-58",
    ),
)

DEPTHS = (10, 30, 50, 70, 90)  # percent: NEEDLES[i] goes at DEPTHS[i], so a depth always gets the same fact
DRAFT_READS = ("segments", "one_pass")  # how the draft reads a prompt longer than its window


def needle_for(depth: int) -> Needle:
    """The fact placed at `depth` percent: the same one in every run, whatever else is measured."""
    nearest = min(range(len(DEPTHS)), key=lambda i: abs(DEPTHS[i] - depth))
    return NEEDLES[nearest]


def haystack(engine: Engine, texts: list[str], n_tokens: int) -> str:
    """The texts joined, cut at n_tokens tokens (the cut falls between whole tokens)."""
    tokens: list[int] = []
    for text in texts:
        tokens += engine.tokenize(text + "\n\n")
        if len(tokens) >= n_tokens:
            break
    if len(tokens) < n_tokens:
        raise ValueError(f"the documents hold {len(tokens)} tokens, fewer than the {n_tokens} asked for")
    return engine.detokenize(tokens[:n_tokens])


def insert_needle(text: str, depth: float, needle: Needle) -> str:
    """The fact on a line of its own at the first line break after `depth` of the text."""
    return insert_needles(text, [(depth, needle)])


def require_distinct(placed: list[tuple[float, Needle]]) -> None:
    """Facts placed together must differ: two depths nearest the same one of DEPTHS share a fact."""
    facts = [needle.fact for _, needle in placed]
    if len(set(facts)) < len(facts):
        raise ValueError(
            "two depths would get the same fact: choose depths nearest different ones of "
            + ",".join(map(str, DEPTHS))
        )


def insert_needles(text: str, placed: list[tuple[float, Needle]]) -> str:
    """Each fact on a line of its own at the first line break after its depth of the original text."""
    require_distinct(placed)
    places = sorted((_line_break_after(text, depth), needle.fact) for depth, needle in placed)
    pieces, last = [], 0
    for at, fact in places:
        pieces += [text[last:at], f"\n{fact}\n"]
        last = at
    return "".join(pieces) + text[last:]


def _line_break_after(text: str, depth: float) -> int:
    at = text.find("\n", int(len(text) * depth))
    return len(text) if at < 0 else at


def needle_token_span(
    engine: Engine, prompt, needle: Needle, offsets: Sequence[int] | None = None
) -> tuple[int, int]:
    """The prompt tokens that spell the fact (located through the text's character offsets: the
    tokens' `offsets` when the caller has them, else computed)."""
    start_char = prompt.parts.text.index(needle.fact)
    if offsets is None:
        offsets = token_char_offsets(engine.runtime.model, prompt)
    (span,) = char_token_spans(
        [(start_char, start_char + len(needle.fact))], offsets, 0, (0, prompt.n_tokens)
    )
    return span


@dataclass(frozen=True)
class DraftNeedle:
    depth: float
    read: str  # segments | one_pass
    n_tokens: int
    needle_kept: float  # share of the fact's tokens in the kept chunks
    kept_fraction: float
    draft_s: float


def draft_keeps_needle(
    engine: Engine,
    text: str,
    needle: Needle,
    depth: float,
    read: str,
    settings: RunSettings,
    cancel: CancelToken = NEVER,
) -> DraftNeedle:
    """Score the prompt with the draft (in segments, or one pass past its window) and select as a
    SpecPrefill run would (keep, at most what fits the window); how much of the fact is kept."""
    prompt = engine.prepare(text, needle.question, settings)
    tokens = prompt.tokens.tolist()
    pass_tokens = engine.draft_pass_tokens(settings) if read == "segments" else 1 << 30
    t0 = time.perf_counter()
    score = run_to_end(
        iter_score_segments(
            engine.scorer,
            tokens,
            prompt.doc_token_span,
            pass_tokens,
            ScoringParams.from_settings(settings, prompt.question_rows),
            cancel,
        )
    )
    draft_s = time.perf_counter() - t0
    offsets = token_char_offsets(engine.runtime.model, prompt)  # the chunks' words and the fact's tokens
    kept_idx = plan_request_selection(
        score.importance, prompt, settings, engine.selection_budget(prompt, settings), [], offsets
    ).kept_idx
    a, b = needle_token_span(engine, prompt, needle, offsets)
    kept = np.isin(np.arange(a, b), kept_idx).mean()
    return DraftNeedle(depth, read, prompt.n_tokens, float(kept), len(kept_idx) / prompt.n_tokens, draft_s)


@dataclass(frozen=True)
class NeedleAnswer:
    depth: float
    run: str
    correct: bool
    answer: str
    ttft_s: float
    draft_s: float
    target_prefill_s: float
    prefill_tokens: int
    document_tokens: int
    fit: str
    seen_fraction: float
    positions: str
    draft_peak_mem_bytes: int
    needle_kept: float  # share of the fact's tokens the target saw
    served_by: str = ""  # in a session (together): how the run was served, e.g. spec_cached_draft


def ask_needle(
    engine: Engine,
    text: str,
    needle: Needle,
    depth: float,
    mode: str,
    settings: RunSettings,
    cancel: CancelToken = NEVER,
    session: DocumentSession | None = None,
) -> list[NeedleAnswer]:
    """One question about the needle, in `mode` (spec, baseline or both: the truncated full prefill);
    in `session` (whose text is `text`), as a follow-up question."""
    prompt = engine.prepare(text, needle.question, settings)
    span = needle_token_span(engine, prompt, needle)
    answers, selection = [], None
    for event in _question_events(engine, text, needle.question, mode, settings, cancel, session):
        if isinstance(event, SelectionMade):
            selection = event.selection
        if isinstance(event, RunFinished):
            r = event.result
            kept = (
                _spec_kept(selection, span, prompt.n_tokens)
                if r.run == "spec" and not r.bypassed
                else _full_kept(r, span, prompt.doc_token_span[0])
            )
            answers.append(
                NeedleAnswer(
                    depth,
                    r.run,
                    is_correct(r.answer, [needle.answer]),
                    r.answer,
                    r.ttft_s,
                    r.draft_s,
                    r.target_prefill_s,
                    r.prefill_tokens,
                    r.document_tokens,
                    r.fit,
                    r.seen_fraction,
                    r.positions,
                    r.draft_peak_mem_bytes,
                    kept,
                    r.served_by,
                )
            )
    return answers


def ask_needles_together(
    engine: Engine,
    text: str,
    placed: list[tuple[float, Needle]],
    mode: str,
    settings: RunSettings,
    cancel: CancelToken = NEVER,
) -> Iterator[NeedleAnswer]:
    """Every fact in one haystack (`text` without them), each asked in turn in one session."""
    doc = insert_needles(text, placed)
    session = DocumentSession(doc)
    for depth, needle in placed:
        yield from ask_needle(engine, doc, needle, depth, mode, settings, cancel, session)


def _question_events(
    engine: Engine,
    text: str,
    question: str,
    mode: str,
    settings: RunSettings,
    cancel: CancelToken,
    session: DocumentSession | None,
):
    if session is None:
        return engine.stream(text, question, mode, settings, cancel)
    if mode == "both":
        return engine.ask_both(session, question, settings, cancel)
    return engine.ask(session, question, mode, settings, cancel)


def _spec_kept(selection: Selection, span: tuple[int, int], n_tokens: int) -> float:
    kept_idx = kept_token_indices(selection.kept_chunks, selection.chunk_size, n_tokens)
    return float(np.isin(np.arange(*span), kept_idx).mean())


def _full_kept(result: RunResult, span: tuple[int, int], doc_start: int) -> float:
    """A full prefill sees the document's head: the fact's tokens before the cut."""
    seen_end = doc_start + result.document_tokens - result.truncated_tokens
    return float(np.mean(np.arange(*span) < seen_end))


def as_json(rows) -> list[dict]:
    return [asdict(row) for row in rows]
