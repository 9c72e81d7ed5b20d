"""A text file's sections by its headings: the parts coverage gives a share of a summary's keep."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled
from engine.core.settings import RunSettings
from engine.ingest import load_document
from engine.ingest.sections import MIN_SECTION_CHARS, markdown_headings, text_sections, underlined_titles
from engine.pipeline.selection_plan import wanted_parts

BODY = "Some words about this part of the document, long enough to fill it. " * 40  # > MIN_SECTION_CHARS


def test_markdown_sections_follow_its_headings_and_ignore_fenced_code():
    text = (
        f"# Options\n\n{BODY}\n\n## Defaults\n\n```python\n# not a heading\n```\n{BODY}\n\n"
        f"Flags\n-----\n\n{BODY}\n"
    )
    assert [title for title, _ in markdown_headings(text)] == ["Options", "Defaults", "Flags"]
    sections = text_sections(text, "guide.md")
    assert [(s.label, s.kind) for s in sections] == [
        ("Options", "section"),
        ("Defaults", "section"),
        ("Flags", "section"),
    ]
    assert text[sections[1].start :].startswith("## Defaults") and text[sections[2].start :].startswith(
        "Flags\n"
    )


def test_rst_titles_are_underlined_at_least_as_long_and_may_be_overlined():
    text = (
        f"*********\n Title\n*********\n\n{BODY}\n\nBasics\n------\n\n{BODY}\n\n"
        f"Too short\n----\n\n{BODY}\n\n----\n\n{BODY}\n\n    indented\n    --------\n\n"
        f"====  ====\nA     B\n====  ====\n\nLast\n====\n\n{BODY}\n"
    )
    assert [title for title, _ in underlined_titles(text)] == ["Title", "Basics", "Last"]
    sections = text_sections(text, "doc.rst")
    assert [s.label for s in sections] == ["Title", "Basics", "Last"]
    assert sections[0].start == 0 and text[sections[1].start :].startswith("Basics\n")


def test_short_sections_join_the_next_and_a_short_last_one_the_one_before():
    text = f"A\n=\n\nshort\n\nB\n=\n\n{BODY}\n\nC\n=\n\n{BODY}\n\nD\n=\n\nshort end\n"
    text = text.replace("\n=\n", "\n===\n")  # underlines of three, as long as each one-letter title
    assert [s.label for s in text_sections(text, "doc.txt")] == ["A", "C"]


def test_long_text_before_the_first_heading_is_its_own_section_under_the_file_name():
    text = f"{BODY}\n\n# First\n\n{BODY}\n"
    assert [s.label for s in text_sections(text, "notes.md")] == ["notes.md", "First"]


@pytest.mark.parametrize(
    "text", ["no headings at all\n" * 300, f"# One\n\n{BODY}\n", "# A\n\nx\n\n# B\n\ny\n"]
)
def test_fewer_than_two_sections_leave_the_file_whole(text):
    sections = text_sections(text, "notes.md")
    assert [(s.label, s.kind, s.start, s.end) for s in sections] == [("notes.md", "text", 0, len(text))]


@settings(deadline=None, max_examples=60)  # markdown-it parses each text: slow on a busy machine
@given(
    st.lists(
        st.tuples(st.sampled_from(["#", "##", "==", "--"]), st.integers(0, 3 * MIN_SECTION_CHARS)),
        max_size=12,
    )
)
def test_sections_tile_the_whole_text_and_each_is_long_enough(layout):
    def heading(mark: str, i: int) -> str:
        return f"{mark} Part {i}\n\n" if mark.startswith("#") else f"Part {i}\n{mark[0] * 8}\n\n"

    text = "".join(heading(mark, i) + "w" * length + "\n\n" for i, (mark, length) in enumerate(layout)) or "x"
    for name in ("doc.md", "doc.rst"):
        sections = text_sections(text, name)
        assert sections[0].start == 0 and sections[-1].end == len(text)
        assert all(a.end == b.start for a, b in zip(sections, sections[1:]))
        if len(sections) > 1:
            assert all(s.end - s.start >= MIN_SECTION_CHARS for s in sections)


MARKDOWN_BLOCKS = [
    "# Atx title\n",
    "Setext title\n===\n",
    "Setext two\n---\n",
    "a paragraph line\nand its lazy second\n",
    "```\n# not a heading\n\n# nor this\n```\n",
    "    # indented code, no heading\n",
    "- a list\n\n  # heading in a list\n",
    "> # quoted heading\n> more\n",
    "\n",
    "<div>\n# html block\n</div>\n",
]


@settings(deadline=None, max_examples=150)
@given(st.lists(st.sampled_from(MARKDOWN_BLOCKS), max_size=30), st.integers(1, 6))
def test_markdown_read_in_pieces_finds_the_headings_a_whole_parse_finds(blocks, piece_lines):
    text = "".join(blocks)
    assert markdown_headings(text, piece_lines=piece_lines) == markdown_headings(text, piece_lines=10**9)


def test_a_cancel_stops_finding_sections():
    cancel = CancelToken()
    cancel.cancel()
    for name in ("big.md", "big.rst"):
        with pytest.raises(Cancelled):
            text_sections(f"# A\n\n{BODY}\n" * 3, name, cancel)


def test_a_loaded_markdown_file_has_sections_that_a_summary_covers(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(f"# Install\n\n{BODY}\n\n# Use\n\n{BODY}\n\n# Configure\n\n{BODY}\n", encoding="utf-8")
    doc = load_document(path)
    assert [s.label for s in doc.segments] == ["Install", "Use", "Configure"]
    assert doc.segment_at(doc.text.index("# Use")).label == "Use"
    summary, look_up = "Summarize what this guide covers.", "What is the default port?"
    wanted = wanted_parts(RunSettings(coverage="auto"), summary, doc.text, doc.segments)
    assert list(wanted.covered) == doc.segments and not wanted.files and not wanted.definitions
    assert not wanted_parts(RunSettings(coverage="auto"), look_up, doc.text, doc.segments)
