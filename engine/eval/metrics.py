"""Answer-quality metrics: correctness against expected strings, agreement between answers."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

_WS = re.compile(r"\s+")

# Chinese and Japanese write words without spaces: each Han or kana character is one token.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_TOKEN = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+")  # a CJK character, or a run of other letters and digits
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_INNER_SEPARATOR = re.compile(r"(?<=[^\W_])[ _](?=[^\W_])")  # a space or an underscore between two words


def normalize(text: str) -> str:
    """Lower-case and collapse whitespace, so matching ignores layout."""
    return _WS.sub(" ", text).strip().lower()


def is_correct(answer: str, expected: list[str]) -> bool:
    """True when any expected string appears in the answer (case- and whitespace-insensitive).

    A number must match whole: "16" is not found in "160", "2016" or "1.16". Letters may
    touch the match ("-DMPICH_IGNORE_CXX_SEEK" holds "MPICH_IGNORE_CXX_SEEK"), since
    answers quote flags and identifiers with prefixes. Between two words a space and an underscore
    match alike: "HYDRA CKPOINT_INTERVAL" holds "HYDRA CKPOINT INTERVAL", as a PDF gives it.
    """
    haystack = normalize(answer)
    return any(_expected_pattern(normalize(e)).search(haystack) for e in expected if e.strip())


def key_point_coverage(answer: str, key_points: Sequence[Sequence[str]]) -> float:
    """Share of the key points the answer mentions: a point counts when any of its phrases is in it."""
    if not key_points:
        return 0.0
    return sum(1 for phrases in key_points if is_correct(answer, list(phrases))) / len(key_points)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% with z = 1.96); (0, 1) when nothing was scored."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


def _expected_pattern(expected: str) -> re.Pattern[str]:
    # A digit at either end must not continue a number: no digit, nor a decimal point and a digit, beside it.
    before = r"(?<!\d)(?<!\d\.)" if expected[0].isdigit() else ""
    after = r"(?!\d)(?!\.\d)" if expected[-1].isdigit() else ""
    # A PDF's text loses an identifier's inner underscores (MPICH's guide reads "HYDRA CKPOINT INTERVAL"),
    # and an answer may restore some of them: between two words, a space and an underscore match alike.
    words = _INNER_SEPARATOR.split(expected)
    return re.compile(before + "[ _]".join(re.escape(word) for word in words) + after)


class UnicodeTokenizer:
    """ROUGE tokens for any script: lower-cased words, one token per CJK character.

    rouge-score's own tokenizer keeps only a-z and 0-9, so two identical Chinese or Russian
    answers would share no token. English words still go through it, to keep its stemming.
    """

    def __init__(self, english: Callable[[str], list[str]]):
        self._english = english  # rouge-score's tokenize for one a-z0-9 word (stems words over 3 letters)

    def tokenize(self, text: str) -> list[str]:
        tokens: list[str] = []
        for word in _TOKEN.findall(text.lower()):
            tokens += self._english(word) if _ASCII_WORD.fullmatch(word) else [word]
        return tokens


@lru_cache(maxsize=1)
def _rouge_scorer():
    # Lazy: rouge-score pulls in nltk, which only scoring needs. Offline, pure Python.
    from nltk.stem import porter
    from rouge_score import rouge_scorer, tokenize

    stemmer = porter.PorterStemmer()
    tokenizer = UnicodeTokenizer(lambda word: tokenize.tokenize(word, stemmer))
    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=tokenizer)


def answer_agreement(reference: str, candidate: str) -> float:
    """ROUGE-L F1 between two answers, in [0, 1]. Two empty answers agree fully."""
    if not reference.strip() and not candidate.strip():
        return 1.0
    return float(_rouge_scorer().score(reference, candidate)["rougeL"].fmeasure)
