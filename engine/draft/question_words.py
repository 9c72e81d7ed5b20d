"""The question's words as a second opinion on the draft's chunk scores.

The draft's attention misses some answers that a plain word match finds: a configuration key's
default three chunks after its heading, a decorator named in the question. On the keep-auto probe's
80 cases (`research/scoring/question_words.py`), keep 0.2 kept 85% of the answers' text
(summaries: of their key points) by the draft's scores alone, and 95% once each chunk's BM25 score
for the question's words also counted.

How they count: both rankings become percentiles in [0, 1]; a chunk sharing no word with the
question gets nothing from the words, one that does gets `weight` times its BM25 percentile on top
of its draft percentile. BM25 itself is bm25s's (Lucene's variant and English stop words).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import numpy as np

WORD = re.compile(r"\w+")
IDENTIFIER_PARTS = re.compile(r"_+|(?<=[a-z0-9])(?=[A-Z])")  # snake_case and camelCase boundaries
BM25_K1, BM25_B = 1.2, 0.75  # the classic defaults (Lucene's); the probe's result held for 0.9 to 1.5


def words(text: str) -> list[str]:
    """Lower-cased words; an identifier also yields its parts, so "session lifetime" in a question
    meets PERMANENT_SESSION_LIFETIME in the document."""
    out: list[str] = []
    for word in WORD.findall(text):
        lower = word.lower()
        if "_" not in word and word[1:] == lower[1:]:  # most words: one part (the split is slow)
            out.append(lower)
            continue
        parts = [p for p in IDENTIFIER_PARTS.split(word) if p]
        out += [p.lower() for p in parts]
        if len(parts) > 1:
            out.append(lower)
    return out


def chunk_texts(text: str, offsets: Sequence[int], chunk_size: int) -> list[str]:
    """Each chunk's text: from its first token's char offset to the next chunk's."""
    starts = [offsets[i] for i in range(0, len(offsets), chunk_size)]
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]


def bm25_chunk_scores(chunks: Sequence[str], question: str, first_unscored: int) -> np.ndarray:
    """Each chunk's BM25 score for the question's words; 0 from chunk `first_unscored` on (the
    question's own chunks, which match it trivially)."""
    bm25s = _bm25s()
    stop = set(bm25s.stopwords.STOPWORDS_EN)
    corpus = [[w for w in words(chunk) if w not in stop] for chunk in chunks]
    terms = [w for w in dict.fromkeys(words(question)) if w not in stop]
    scores = np.zeros(len(chunks))
    if terms and any(corpus):
        index = bm25s.BM25(k1=BM25_K1, b=BM25_B)
        index.index(corpus, show_progress=False)
        scores = np.asarray(index.get_scores(terms), dtype=np.float64)
    scores[first_unscored:] = 0.0
    return scores


def _bm25s():
    import bm25s  # lazy: heavy to import (0.2 s), and only a selection with the question words needs it
    import bm25s.stopwords

    # bm25s sets its logger to DEBUG when imported, which would print a line per index to every user's stderr.
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def percentiles(scores: np.ndarray) -> np.ndarray:
    """Each score's rank as a share of the others: 0 for the lowest, 1 for the highest (ties by order)."""
    ranks = np.argsort(np.argsort(scores, kind="stable"), kind="stable")
    return ranks / max(len(scores) - 1, 1)


def ranked_with_words(draft_scores: np.ndarray, word_scores: np.ndarray, weight: float) -> np.ndarray:
    """What the selection ranks chunks by: the draft's percentile, plus `weight` times the words'
    percentile for the chunks that share a word with the question."""
    draft_scores = np.asarray(draft_scores, dtype=np.float64)
    if weight <= 0 or not np.any(word_scores > 0):
        return draft_scores
    return percentiles(draft_scores) + weight * percentiles(word_scores) * (word_scores > 0)
