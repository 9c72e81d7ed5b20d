"""The long code-base suite (resources/eval/codebase-long.jsonl) is well formed and really long.

Its folder, structlog 26.1.0's source (~54K target tokens), is longer than the target's 32K window. Each case's
answer sits in a known file (ANSWER_FILE); at least three of those files lie wholly past the first 32,000 tokens,
which a full prefill cut to the window never sees, and at least two wholly inside the first 25,000. The text facts
are always checked; the token positions only where the default target GGUF is on disk (tokenized vocab-only, ~2 s).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from engine.core.samples import sample_folder
from engine.eval.suite import load_suite
from engine.ingest import load_document
from engine.pipeline.named_definitions import named_definitions
from engine.pipeline.named_files import named_files

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "resources" / "eval" / "codebase-long.jsonl"
UNNAMED_SUITE = ROOT / "resources" / "eval" / "codebase-long-unnamed.jsonl"  # the same cases, no file named
SAMPLE = "structlog"  # resources/samples/code/structlog.tar.gz, opened as a folder by engine.core.samples

# Where each answer sits (a segment label of the ingested folder).
ANSWER_FILE = {
    "structlog-native-interpolate-helper": "src/structlog/_native.py",
    "structlog-output-lock-helper": "src/structlog/_output.py",
    "structlog-contextvars-pull-request": "src/structlog/contextvars.py",
    "structlog-rich-color-system": "src/structlog/dev.py",
    "structlog-stdlib-logger-class": "src/structlog/stdlib.py",
    "structlog-threadlocal-class-prefix": "src/structlog/threadlocal.py",
    "structlog-tracebacks-max-frames": "src/structlog/tracebacks.py",
    "structlog-twisted-repr-wrapper": "src/structlog/twisted.py",
}
# The definitions each unnamed question names (the files they are in), where it names one.
UNNAMED_DEFINITION_FILES = {
    "structlog-output-lock-helper": {"src/structlog/_output.py"},
    "structlog-rich-color-system": {"src/structlog/dev.py"},
    "structlog-stdlib-logger-class": {"src/structlog/stdlib.py", "src/structlog/twisted.py"},
    "structlog-threadlocal-class-prefix": {"src/structlog/threadlocal.py"},
    "structlog-tracebacks-max-frames": {"src/structlog/dev.py", "src/structlog/tracebacks.py"},
}
MIN_CASES = 6
MIN_ANSWER_FILES = 6
# The folder measured 233,254 characters for 54,447 target tokens (4.3 characters a token): 180,000 characters
# stand for at least ~41K tokens, well past the 32K window.
MIN_CHARS = 180_000
WINDOW_CUT, EARLY_CUT = 32_000, 25_000
MIN_PAST_CUT, MIN_EARLY = 3, 2
MIN_TOKENS, MAX_TOKENS = 45_000, 80_000


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.lower()).strip()


@pytest.fixture(scope="module")
def cases():
    return load_suite(SUITE)


@pytest.fixture(scope="module")
def folder():
    return sample_folder(SAMPLE)


@pytest.fixture(scope="module")
def doc(folder):
    return load_document(folder)


@pytest.fixture(scope="module")
def segment_text(doc):
    return {s.label: doc.text[s.start : s.end] for s in doc.segments}


def test_suite_loads_with_enough_cases_all_on_the_folder(cases, folder):
    assert len(cases) >= MIN_CASES
    assert all(c.doc == folder for c in cases)
    assert all(c.answers for c in cases)
    assert {c.id for c in cases} == set(ANSWER_FILE)


def test_folder_ingests_without_warnings(doc):
    assert doc.warnings == []


def test_folder_text_is_longer_than_the_window(doc):
    assert len(doc.text) >= MIN_CHARS


def test_every_answer_is_in_the_folder_text(cases, doc):
    text = _norm(doc.text)
    missing = [(c.id, a) for c in cases for a in c.answers if _norm(a) not in text]
    assert not missing


def test_every_answer_is_in_its_answer_file(cases, segment_text):
    missing = [
        (c.id, a) for c in cases for a in c.answers if _norm(a) not in _norm(segment_text[ANSWER_FILE[c.id]])
    ]
    assert not missing


def test_answers_lie_in_enough_distinct_files(cases):
    assert len({ANSWER_FILE[c.id] for c in cases}) >= MIN_ANSWER_FILES


def _segment_token_spans(doc) -> dict[str, tuple[int, int]]:
    """Each file's [start, end) in the target's tokens of the document text."""
    from engine.llama.native import LlamaModel
    from engine.models.defaults import TARGET

    if not TARGET.path.exists():
        pytest.skip(f"the default target model is not on disk ({TARGET.path})")
    model = LlamaModel(TARGET.path, vocab_only=True)
    try:
        tokens = model.tokenize(doc.text, parse_special=False)
        piece_bytes = np.array([len(model.token_piece(t)) for t in tokens], dtype=np.int64)
    finally:
        model.close()
    char_bytes = np.fromiter(
        (len(ch.encode("utf-8")) for ch in doc.text), dtype=np.int64, count=len(doc.text)
    )
    assert piece_bytes.sum() == char_bytes.sum()
    char_at_byte = np.repeat(np.arange(len(doc.text)), char_bytes)
    token_char = char_at_byte[np.concatenate([[0], np.cumsum(piece_bytes)[:-1]])]
    spans = {
        s.label: (int(np.searchsorted(token_char, s.start)), int(np.searchsorted(token_char, s.end)))
        for s in doc.segments
    }
    spans[""] = (0, len(tokens))
    return spans


def test_answer_files_lie_past_and_before_the_window_cut(cases, doc):
    spans = _segment_token_spans(doc)
    assert MIN_TOKENS <= spans[""][1] <= MAX_TOKENS
    answer_spans = [spans[ANSWER_FILE[c.id]] for c in cases]
    assert sum(start >= WINDOW_CUT for start, _ in answer_spans) >= MIN_PAST_CUT
    assert sum(end <= EARLY_CUT for _, end in answer_spans) >= MIN_EARLY


def test_the_unnamed_suite_asks_the_same_cases_naming_no_file(cases, doc):
    unnamed = load_suite(UNNAMED_SUITE)
    assert [(c.id, c.doc, c.answers) for c in unnamed] == [(c.id, c.doc, c.answers) for c in cases]
    assert all(named_files(c.question, doc.segments) == [] for c in unnamed)
    assert all(c.question != named.question for c, named in zip(unnamed, cases))


def test_the_unnamed_suite_names_definitions_where_it_says(doc):
    found = {
        c.id: {d.path for d in named_definitions(c.question, doc.text, doc.segments)}
        for c in load_suite(UNNAMED_SUITE)
    }
    assert {case: files for case, files in found.items() if files} == UNNAMED_DEFINITION_FILES
