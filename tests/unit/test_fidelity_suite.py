"""The fidelity suite (resources/eval/fidelity.jsonl) is well formed and every expected answer is in its document.

Each document is extracted once with engine.ingest.load_document (R-intro.pdf takes a while). An answer counts as
present when it occurs in the extracted text after lower-casing and collapsing whitespace; a formatting variant
("500,000" for "500_000") passes when it equals a present answer of the same case once punctuation and spaces are
dropped. `count` answers are recounted from the text, and each summary key point needs one phrase in the text.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from engine.core.samples import sample_cache
from engine.eval.suite import load_suite
from engine.ingest import load_document

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "resources" / "eval" / "fidelity.jsonl"
SAMPLES = ROOT / "resources" / "samples"

MIN_SCORED = 60
MIN_DOCS = 8
MIN_PER_KIND = {"number": 8, "fact": 8, "multihop": 6, "code": 8, "count": 5, "choice": 5, "summary": 10}
MIN_SUMMARY_DOCS = 6
NUMBER_WORDS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 11: "eleven", 29: "twenty-nine"}


def _raw_cases() -> list[dict]:
    """The suite's JSON objects, for the fields (key_points) a Case may not carry."""
    lines = SUITE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip() and not line.strip().startswith("#")]


RAW = _raw_cases()
BY_ID = {c["id"]: c for c in RAW}


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.lower()).strip()


def _loose(s: str) -> str:
    return re.sub(r"[^a-z0-9.]", "", s.lower())


def _section(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i : text.index(end, i)]


# How each `count` case's number is recounted from the extracted text (not from the suite).
RECOUNT = {
    "flask-builtin-config-count": lambda t: len(re.findall(r"^\.\. py:data:: \w+", t, re.M)),
    "flask-best-practices-count": lambda t: len(
        re.findall(r"^\d+\.\s", _section(t, "Configuration Best Practices", "Development / Production"), re.M)
    ),
    "click-envvar-true-values-count": lambda t: len(
        re.findall(
            r"`[^`]+`",
            next(line for line in t.splitlines() if "are interpreted as activating the flag" in line),
        )
    ),
    "click-value-sources-count": lambda t: len(
        re.findall(r"^\d+\.\s", _section(t, "### Value sources", "### Slot arbitration"), re.M)
    ),
    "cachetools-func-decorators-count": lambda t: len(
        re.findall(r"^\.\. decorator:: \w+", t[t.index(".. module:: cachetools.func") :], re.M)
    ),
    "cachetools-key-functions-count": lambda t: len(
        re.findall(
            r"^\.\. autofunction:: \w+",
            _section(t, ".. module:: cachetools.keys", ".. module:: cachetools.func"),
            re.M,
        )
    ),
    "mpich-gforker-options-count": lambda t: len(
        set(
            re.findall(
                r"^(-\w+)",
                _section(
                    t,
                    "5.4.1 mpiexec arguments for gforker\nIn addition",
                    "In addition to the commandline arguments",
                ),
                re.M,
            )
        )
    ),
    "xfig-import-steps-count": lambda t: len(
        re.findall(
            r"^\d+\.\s",
            _section(t, "The procedure for importing a picture image", "The picture image can now be"),
            re.M,
        )
    ),
    "mpfi-contributors-count": lambda t: len(
        re.split(
            r",\s*|\s+and\s+",
            " ".join(_section(t, "MPFI has been written by", ". Its development").split()[5:]),
        )
    ),
}


@pytest.fixture(scope="module")
def cases():
    return load_suite(SUITE)


@pytest.fixture(scope="module")
def texts():
    """Extracted text per document path, each document loaded once for the module."""
    cache: dict[Path, str] = {}

    def get(doc: Path) -> str:
        if doc not in cache:
            cache[doc] = load_document(doc).text
        return cache[doc]

    return get


def _scored(c: dict) -> bool:
    return bool(c.get("answers")) or bool(c.get("key_points"))


def test_suite_size_kinds_and_documents(cases):
    assert len(cases) == len(RAW)
    assert sum(_scored(c) for c in RAW) >= MIN_SCORED
    assert all(_scored(c) for c in RAW), "every case is scored (answers or key_points)"
    kinds = Counter(c.kind for c in cases)
    for kind, minimum in MIN_PER_KIND.items():
        assert kinds[kind] >= minimum, (kind, kinds[kind])
    assert set(kinds) <= set(MIN_PER_KIND), kinds
    assert len({c.doc for c in cases}) >= MIN_DOCS
    assert len({c.doc for c in cases if c.kind == "summary"}) >= MIN_SUMMARY_DOCS


def test_documents_are_real_samples(cases):
    for doc in {c.doc for c in cases}:
        # a sample code base opens from its archive (engine.core.samples) into the cache
        assert doc.is_relative_to(SAMPLES.resolve()) or doc.is_relative_to(sample_cache()), doc
        files = [p for p in doc.rglob("*") if p.is_file()] if doc.is_dir() else [doc]
        assert files and all(p.stat().st_size <= 1_000_000 for p in files), doc


def test_case_fields(cases):
    for c in cases:
        raw = BY_ID[c.id]
        if c.kind == "summary":
            assert "answers" not in raw, c.id
            points = raw.get("key_points")
            assert isinstance(points, list) and 4 <= len(points) <= 8, c.id
            assert all(
                isinstance(p, list) and 1 <= len(p) <= 4 and all(isinstance(s, str) and s.strip() for s in p)
                for p in points
            ), c.id
        else:
            assert c.answers and "key_points" not in raw, c.id
        if c.kind == "choice":
            assert (
                "A) " in c.question and "D) " in c.question and "Answer with the option's text." in c.question
            )
            options = _norm(c.question)
            assert any(_norm(a) in options for a in c.answers), c.id
            assert all(len(a.strip()) > 1 for a in c.answers), f"{c.id}: a bare letter is not an answer"
        if c.kind == "count":
            assert c.id in RECOUNT, f"{c.id}: add how to recount it"


@pytest.mark.slow
def test_answers_occur_in_documents(cases, texts):
    for c in cases:
        if c.kind in ("summary", "count"):
            continue
        text = _norm(texts(c.doc))
        present = [a for a in c.answers if _norm(a) in text]
        assert present, f"{c.id}: no answer in {c.doc.name}"
        for a in c.answers:
            assert a in present or any(_loose(a) == _loose(p) for p in present), (
                f"{c.id}: {a!r} is neither in {c.doc.name} nor a variant of an answer that is"
            )


def test_counts_recounted_from_documents(cases, texts):
    for c in cases:
        if c.kind != "count":
            continue
        n = RECOUNT[c.id](texts(c.doc))
        assert str(n) in c.answers, f"{c.id}: recounted {n}, answers {c.answers}"
        assert NUMBER_WORDS.get(n) in c.answers, f"{c.id}: add the word form of {n}"


def test_summary_key_points_occur_in_documents(cases, texts):
    for c in cases:
        if c.kind != "summary":
            continue
        text = _norm(texts(c.doc))
        for point in BY_ID[c.id]["key_points"]:
            assert any(_norm(p) in text for p in point), f"{c.id}: no phrase of {point} in {c.doc.name}"
