"""A text file's sections, found by its headings, so that coverage can give each a share of what a
summary keeps (a PDF has pages and a folder has files; a single .md or .rst file had one part).

Markdown headings come from markdown-it-py's parse (it knows fenced code, where "# comment" is no
heading). reStructuredText and plain text mark a title by underlining it (optionally overlining it
too) with one punctuation character repeated at least as long as the title: that rule is read here,
line by line, since docutils gives no reliable source offsets for its sections. Both read a big
file in pieces and check the cancel token between them (10 MB of Markdown takes 2 to 5 s).
Sections shorter than MIN_SECTION_CHARS (about a PDF page) join the section that follows, so that a
run of short headings does not become dozens of parts that each claim a chunk.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

from engine.core.cancel import NEVER, CancelToken
from engine.ingest.document import Segment

MIN_SECTION_CHARS = 2000
MARKDOWN_SUFFIXES = (".md", ".markdown")
PIECE_LINES = 20_000  # lines parsed between two cancel checks (about 1 MB of prose, 0.5 s)
UNDERLINE = re.compile(r"([!-/:-@\[-`{-~])\1{2,}")  # one punctuation character, three times or more


def text_sections(text: str, name: str, cancel: CancelToken = NEVER) -> list[Segment]:
    """The file's sections (label: the heading), or one "text" segment when it has fewer than two."""
    markdown = Path(name).suffix.lower() in MARKDOWN_SUFFIXES
    headings = markdown_headings(text, cancel) if markdown else underlined_titles(text, cancel)
    sections = merge_short(section_spans(text, headings, name))
    if len(sections) < 2:
        return [Segment(name, "text", 0, len(text))]
    return [Segment(label, "section", start, end) for label, start, end in sections]


def markdown_headings(
    text: str, cancel: CancelToken = NEVER, piece_lines: int = PIECE_LINES
) -> list[tuple[str, int]]:
    """(title, line index) of each Markdown heading, ATX ("## Title") or setext (underlined).

    The text is parsed a piece of lines at a time. A piece's last top-level block may be cut short,
    so its headings are taken up to that block, where the next piece starts: no container is open
    at a top-level block's first line, so parsing from there reads what parsing the whole would."""
    # Block parsing alone finds the headings and their text; inline parsing would double the time
    # (about 0.5 s per MB without it) and nothing here reads emphasis or links.
    parser = MarkdownIt("commonmark").disable("inline")
    lines = text.split("\n")
    headings: list[tuple[str, int]] = []
    start, size = 0, piece_lines
    while start < len(lines):
        cancel.raise_if_cancelled()
        end = min(start + size, len(lines))
        tokens = parser.parse("\n".join(lines[start:end]))
        upto = end - start if end == len(lines) else last_block_line(tokens)
        if upto == 0:  # one block fills the piece: read a longer one
            size *= 2
            continue
        headings += [(title, start + line) for title, line in piece_headings(tokens) if line < upto]
        start, size = start + upto, piece_lines
    return headings


def piece_headings(tokens: list) -> list[tuple[str, int]]:
    return [
        (" ".join(tokens[i + 1].content.split()), token.map[0])
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.map
    ]


def last_block_line(tokens: list) -> int:
    """The first line of the last top-level block (0 when there is none or only one)."""
    return max((token.map[0] for token in tokens if token.level == 0 and token.map), default=0)


def underlined_titles(text: str, cancel: CancelToken = NEVER) -> list[tuple[str, int]]:
    """(title, line index where the heading starts: its overline, if any) of each underlined title: a
    line at the left margin after a blank line (or the overline), under which one punctuation
    character repeats at least as long as it."""
    lines = text.split("\n")
    headings = []
    for i in range(1, len(lines)):
        if i % PIECE_LINES == 1:  # the first line, then every piece
            cancel.raise_if_cancelled()
        under, title = lines[i].rstrip(), lines[i - 1].rstrip()
        if not UNDERLINE.fullmatch(under) or not title.strip() or UNDERLINE.fullmatch(title.strip()):
            continue
        over = i >= 2 and lines[i - 2].rstrip() == under
        if len(under) < len(title.strip()) or (title[0].isspace() and not over):
            continue
        before = i - 3 if over else i - 2
        if before < 0 or not lines[before].strip():
            headings.append((title.strip(), i - 2 if over else i - 1))
    return headings


def section_spans(text: str, headings: list[tuple[str, int]], name: str) -> list[tuple[str, int, int]]:
    """(label, start, end) chars of each section, from its heading's line to the next heading's. Text
    before the first heading is a section under the file's name when it is long enough to stand
    alone; else the first section starts at the top."""
    if not headings:
        return []
    line_starts = [0, *(match.end() for match in re.finditer("\n", text))]
    starts = [(title, line_starts[line]) for title, line in headings]
    if starts[0][1] >= MIN_SECTION_CHARS and text[: starts[0][1]].strip():
        starts.insert(0, (name, 0))
    starts[0] = (starts[0][0], 0)
    ends = [start for _, start in starts[1:]] + [len(text)]
    return [(title, start, end) for (title, start), end in zip(starts, ends)]


def merge_short(sections: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Each section shorter than MIN_SECTION_CHARS joined by the ones after it until it is long enough
    (under its own heading); a short last section joins the one before."""
    merged: list[tuple[str, int, int]] = []
    for label, start, end in sections:
        if merged and merged[-1][2] - merged[-1][1] < MIN_SECTION_CHARS:
            merged[-1] = (merged[-1][0], merged[-1][1], end)
        else:
            merged.append((label, start, end))
    if len(merged) > 1 and merged[-1][2] - merged[-1][1] < MIN_SECTION_CHARS:
        last = merged.pop()
        merged[-1] = (merged[-1][0], merged[-1][1], last[2])
    return merged
