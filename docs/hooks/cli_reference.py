"""MkDocs hook: fills the CLI reference page from the parser (engine/cli/reference.py)."""

from engine.cli.main import build_parser
from engine.cli.reference import render_markdown

MARKER = "<!-- specprefill-cli-reference -->"


def on_page_markdown(markdown: str, page, **_) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_markdown(build_parser()))
