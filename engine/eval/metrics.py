"""Answer-quality metrics: correctness against expected strings, agreement between answers."""

from __future__ import annotations

import re
from functools import lru_cache

_WS = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Lower-case and collapse whitespace, so matching ignores layout."""
    return _WS.sub(" ", text).strip().lower()


def is_correct(answer: str, expected: list[str]) -> bool:
    """True when any expected string appears in the answer (case- and whitespace-insensitive)."""
    haystack = normalize(answer)
    return any(normalize(e) in haystack for e in expected if e.strip())


@lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer  # offline, pure Python

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def answer_agreement(reference: str, candidate: str) -> float:
    """ROUGE-L F1 between two answers, in [0, 1]. Two empty answers agree fully."""
    if not reference.strip() and not candidate.strip():
        return 1.0
    return float(_rouge_scorer().score(reference, candidate)["rougeL"].fmeasure)
