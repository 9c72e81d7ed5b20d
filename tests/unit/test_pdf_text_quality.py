"""PDF text without extraction artifacts: the sample PDFs read clean, and the clean-up is conservative."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.ingest import load_document
from engine.ingest.pdf_text import join_line_end_hyphens, normalise_page_text
from tests.fixtures.pdfs import write_pdf
from tests.tools.pdf_text_eval import artifact_counts

DOCS = Path(__file__).resolve().parents[2] / "resources" / "samples" / "docs"
SAMPLES = ["mpich-user-guide.pdf", "xfig-howto.pdf", "mpfi.pdf", "R-intro.pdf"]

# Line-end hyphens the clean-up leaves, because the document does not say whether they are
# compounds: `non-\nnumeric`, `sub-\nclasses`, `user-\ncontrollable`, `Motor-\nMotor+` (measured 1-4).
MAX_LINE_END_HYPHENS = 5

# (phrase, the page it is on): each was broken by an artifact before the clean-up
PHRASES = {
    "mpich-user-guide.pdf": [
        ("MPICH User’s Guide*", "page 1"),  # the `*` was the glyph name `/x2A`
        ("Computational Sciences Division", "page 1"),  # `Sci-\nences`
        ("You can also automatically checkpoint", "page 14"),
        ("called Hydra", "page 4"),
    ],
    "xfig-howto.pdf": [
        ("a large number of hand-drawn charts", "page 10"),  # a compound keeps its hyphen
        ("Fig and Fig-color", "page 24"),
        ("ferric-chloride etchant", "page 18"),
        ("It’s not difficult to learn", "page 3"),
    ],  # `ﬃ`
    "mpfi.pdf": [("using an unassigned variable inadvertently", "page 11"), ("Nathalie Revol", "page 22")],
    "R-intro.pdf": [
        ("independent, homoscedastic errors", "page 61"),
        ("techniques in user-contributed packages", "page 73"),
        ("make and distribute verbatim", "page 2"),
    ],
}

_loaded: dict[str, object] = {}


def sample(name: str):
    path = DOCS / name
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    if name not in _loaded:
        _loaded[name] = load_document(path)
    return _loaded[name]


# --------------------------------------------------------------------------- the sample PDFs


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_pdfs_have_no_extraction_artifacts(name):
    counts = artifact_counts(sample(name).text)
    assert counts["escapes"] == 0  # /x2A, /uni2022, (cid:12)
    assert counts["unjoined"] == 0  # `exam-\nple` where the document spells `example`
    assert counts["ligat"] == 0
    assert counts["odd"] == 0  # replacement, private-use and control characters
    assert counts["spaced"] <= 1  # xfig's figure has one label of spaced letters
    assert counts["hyph-eol"] <= MAX_LINE_END_HYPHENS


@pytest.mark.parametrize("name", SAMPLES)
def test_known_phrases_read_intact_on_their_page(name):
    doc = sample(name)
    for phrase, page in PHRASES[name]:
        assert phrase in doc.text, phrase
        assert doc.segment_at(doc.text.index(phrase)).label == page, phrase


@pytest.mark.parametrize("name", SAMPLES)
def test_pages_keep_their_spans_after_the_clean_up(name):
    doc = sample(name)
    spans = [(s.start, s.end) for s in doc.segments]
    assert all(start < end for start, end in spans)
    assert all(a_end + 2 == b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert spans[-1][1] == len(doc.text)
    assert all(doc.text[s.start : s.end] == doc.text[s.start : s.end].strip() for s in doc.segments)


def test_a_hyphen_joined_on_one_page_shifts_the_next_pages_span(tmp_path):
    # `hand` and `drawn` are words of their own here: `hand-\ndrawn` may be a compound, so it stays
    last = "well-known, drawn by hand"
    pages = ["an exam-\nple of instruc-\ntions", "one example", f"a well-\nknown, hand-\ndrawn, {last}"]
    doc = load_document(write_pdf(tmp_path / "hyphens.pdf", pages))
    expected = ["an example of instructions", "one example", f"a well-known, hand-\ndrawn, {last}"]
    assert [doc.text[s.start : s.end] for s in doc.segments] == expected
    assert doc.text == "\n\n".join(expected)
    assert doc.segment_at(doc.text.index("one example")).label == "page 2"


# --------------------------------------------------------------------------- normalise_page_text


@pytest.mark.parametrize("raw,clean", [
    ("MPICH User’s Guide/x2A\n/x2A This work", "MPICH User’s Guide*\n* This work"),
    ("a /uni2022 bullet", "a • bullet"),
    ("/x2a lower-case hex", "* lower-case hex"),
    ("/x0A is a control character", "/x0A is a control character"),  # not text: the name stays
    ("/x2Afile and /unique and /x2A3", "/x2Afile and /unique and /x2A3"),  # not a whole glyph name
    ("/usr/x11/bin", "/usr/x11/bin"),
    ("\ufb01le \ufb02ow e\ufb00ort o\ufb03ce ba\ufb04e", "file flow effort office baffle"),
    ("exam\u00ad\nple and hy\u00adphen", "example and hyphen"),  # a soft hyphen is a discretionary break
    ("one\r\ntwo\rthree\x00\x07", "one\ntwo\nthree"),
    ("µ ² … ½", "µ ² … ½"),  # only ligatures are NFKC-normalised
])  # fmt: skip
def test_normalise_page_text(raw, clean):
    assert normalise_page_text(raw) == clean


# --------------------------------------------------------------------------- join_line_end_hyphens


@pytest.mark.parametrize("pages,joined", [
    # the joined word is spelled elsewhere in the document
    (["an exam-\nple, one example"], ["an example, one example"]),
    (["Sci-\nDAC funds SciDAC"], ["SciDAC funds SciDAC"]),
    (["exam-\nple", "example"], ["example", "example"]),  # evidence from another page
    # no evidence: lower case both sides, and not two words of their own
    (["instruc-\ntions follow"], ["instructions follow"]),
    (["Stan-\ndard input"], ["Standard input"]),
    # the compound is spelled elsewhere: it keeps its hyphen and loses the line break
    (["a well-\nknown fact, a well-known one"], ["a well-known fact, a well-known one"]),
    (["use --with-\nmpfr, as in --with-mpfr=DIR"], ["use --with-mpfr, as in --with-mpfr=DIR"]),
    # undecidable: stays as it was
    (["hand-\ndrawn by hand, as drawn"], ["hand-\ndrawn by hand, as drawn"]),
    (["user-\ncontrollable, user-contributed"], ["user-\ncontrollable, user-contributed"]),
    (["Sci-\nDAC"], ["Sci-\nDAC"]),  # a capital after the hyphen: an acronym or a name
    (["Motor-\nMotor+"], ["Motor-\nMotor+"]),
    (["--with-\nmpfr"], ["--with-\nmpfr"]),  # an option
    (["mpfi_-\nset"], ["mpfi_-\nset"]),  # an identifier
    (["DE-AC02-\n06CH11357"], ["DE-AC02-\n06CH11357"]),  # digits
    (["go to sec-\n2tion"], ["go to sec-\n2tion"]),
    # hyphens that do not end a line are never touched
    (["well-known, state-of-the-art, x-ray"], ["well-known, state-of-the-art, x-ray"]),
    (["exam- ple", "exam -\nple"], ["exam- ple", "exam -\nple"]),
    # nor does a word continue onto the next page
    (["an exam-", "ple"], ["an exam-", "ple"]),
])  # fmt: skip
def test_join_line_end_hyphens(pages, joined):
    assert join_line_end_hyphens(pages) == joined


@pytest.mark.parametrize(
    "page",
    ["A" * 2_000_000, "a-" * 1_000_000, "ab-\n" * 500_000, "/x2" * 600_000],
    ids=["one long word", "a hyphen chain", "line-end hyphens", "escape prefixes"],
)
def test_the_clean_up_takes_linear_time_on_a_huge_page(page):
    started = time.monotonic()
    join_line_end_hyphens([normalise_page_text(page)])
    assert time.monotonic() - started < 3.0  # a backtracking pattern takes minutes here


_PIECES = [
    "exam",
    "ple",
    "well",
    "known",
    "Sci",
    "DAC",
    "x",
    "a",
    " ",
    " ",
    "\n",
    "-",
    "-\n",
    "_",
    "/",
    ".",
    "2",
]
texts = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@given(st.lists(texts, min_size=1, max_size=3))
def test_only_line_end_hyphens_and_their_line_breaks_are_removed(pages):
    for before, after in zip(pages, join_line_end_hyphens(pages)):

        def letters(s: str) -> str:
            return s.replace("-", "").replace("\n", "")

        assert letters(after) == letters(before)  # nothing but hyphens and line breaks goes
        assert len(before) - len(after) <= 2 * before.count("-\n")  # only from `-\n` pairs
        assert _midline_hyphens(after) >= _midline_hyphens(before)


def _midline_hyphens(s: str) -> int:
    return sum(1 for i, ch in enumerate(s) if ch == "-" and s[i + 1 : i + 2] != "\n")


@given(
    st.lists(
        st.sampled_from(["well-known", "state-of-the-art", "x-ray", "word", " ", "\n", ", "]), max_size=30
    ).map("".join)
)
def test_a_text_without_line_end_hyphens_is_unchanged(text):
    assert join_line_end_hyphens([text]) == [text]


@given(st.text(st.sampled_from(list("/xuni2AaF0\ufb01\u00ad\r\n -e")), max_size=40))
def test_normalising_twice_changes_nothing(text):
    once = normalise_page_text(text)
    assert normalise_page_text(once) == once
