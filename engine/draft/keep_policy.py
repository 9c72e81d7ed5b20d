"""keep=auto: how much of the prompt SpecPrefill keeps for one question, from the draft's scores.

A look-up question puts the draft's attention on a few chunks; a summary or a counting question
spreads it over the document. The spread is measured as the share of the free chunks (not the
always-kept first and question chunks) that hold most of the score mass above the median, and
mapped linearly onto [floor, ceiling]. A question worded as a broad one (summarize, how many,
list all) gets a fixed broad keep whatever its scores, since a single look-ahead reads what such a
question needs least well; coverage then spreads that keep over the document's parts. A question
that joins two facts (it states a premise, then asks about it: "mpfi_init gives a variable the
default precision. What is that precision?") gets a fixed joined keep: its second fact is where
the draft's selection failed most at every spread (a multi-hop case's answer text was kept at 0.2
in 4 of 7 cases, at 0.3 in 6 of 7), and the target needs more than the answer's chunk to make the
join (on the fidelity suite's 11 joined questions the full prefill answers: 8 right at 0.2, 9 at
0.3, 11 at 0.4). Any other question in a long prompt (`long_tokens` and up) keeps the floor: the
answer of a look-up sits in a few chunks, and a tenth of 10,000 tokens is already 31 chunks, what
keep 0.2 gives a 5,000-token document (on the fidelity suite's 27 such look-ups, of the 19 the full
prefill answers the floor answered 17 and the spread's keeps 17 too, each missing two, at 1.6 times
the floor's tokens).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

MASS = 0.8  # the share of the excess score mass the "relevant" chunks hold
# Spread at or below LOW keeps the floor, at or above HIGH the ceiling; linear between.
SPREAD_LOW, SPREAD_HIGH = 0.10, 0.35
_BROAD = re.compile(
    r"\b(summar\w*|overview|outline|main (points|topics|ideas|parts)|what (this|the) \w+ (covers?|is about)"
    r"|list (all|every)|enumerate"
    r"|how many\b[^?]*\b(list\w*|describ\w*|mention\w*|defin\w*|document\w*|contain\w*|provid\w*))\b",
    re.IGNORECASE,
)
# A premise sentence or clause, then a question ("... version. Which value ...?", "... figure; what
# file ...?"), or a reference back ("the same").
_JOINED = re.compile(r"\.\s+[A-Z][^?]*\?|;\s*(what|which|who|where|when|how)\b[^?]*\?|\b[Tt]h(e|at) same\b")


@dataclass(frozen=True)
class KeepChoice:
    keep: float
    reason: str  # short, for the run result and the app: "the relevant text is concentrated"
    broad: bool  # the question is worded as a whole-document one (coverage auto turns on)
    spread: float  # the measured spread, in [0, 1]


def is_broad_question(question: str) -> bool:
    """Summaries, counts, lists: questions about the whole document rather than one place in it."""
    return bool(_BROAD.search(question))


def is_joined_question(question: str) -> bool:
    """A question that joins two facts: it states one, then asks about what it points to."""
    return bool(_JOINED.search(question)) and not is_broad_question(question)


def score_spread(chunk_scores: np.ndarray, protected: list[int]) -> float:
    """Share of the free chunks that hold MASS of the score mass above their median (0: one chunk
    stands out; about 0.5: nothing does). A flat score row is fully spread (1.0)."""
    free = np.delete(np.asarray(chunk_scores, dtype=np.float64), protected)
    if len(free) == 0:
        return 1.0
    excess = np.clip(free - np.median(free), 0.0, None)
    total = float(excess.sum())
    if total <= 0.0:
        return 1.0
    ordered = np.sort(excess)[::-1]
    needed = int(np.searchsorted(np.cumsum(ordered), MASS * total)) + 1
    return needed / len(free)


def spread_position(spread: float, low: float = SPREAD_LOW, high: float = SPREAD_HIGH) -> float:
    """Where the spread stands between `low` (0: concentrated) and `high` (1: spread out), clipped."""
    return min(max((spread - low) / (high - low), 0.0), 1.0)


def choose_keep(
    chunk_scores: np.ndarray,
    protected: list[int],
    question: str,
    floor: float,
    ceiling: float,
    *,
    broad_keep: float,
    joined_keep: float,
    prompt_tokens: int = 0,
    long_tokens: int | None = None,
) -> KeepChoice:
    """The keep for this question: `broad_keep` for a broad question, `joined_keep` for one that joins
    two facts, the floor for any other in a prompt of `long_tokens` or more, else from the scores'
    spread."""
    spread = score_spread(chunk_scores, protected)
    if is_broad_question(question):
        return KeepChoice(broad_keep, "a broad question, such as a summary", True, spread)
    if is_joined_question(question):
        return KeepChoice(joined_keep, "the question joins two facts", False, spread)
    if long_tokens is not None and prompt_tokens >= long_tokens:
        return KeepChoice(floor, "a look-up in a long document", False, spread)
    t = spread_position(spread)
    keep = round(floor + t * (ceiling - floor), 3)
    if t == 0.0:
        reason = "the relevant text is concentrated"
    elif t == 1.0:
        reason = "the relevant text is spread out"
    else:
        reason = "the relevant text is partly spread"
    return KeepChoice(keep, reason, False, spread)
