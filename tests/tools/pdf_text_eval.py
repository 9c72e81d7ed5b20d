"""Measure extraction artifacts in the sample PDFs, per extractor: a table to decide from.

    .venv/bin/python tests/tools/pdf_text_eval.py [PDF ...]

Extractors (pypdfium2 rows only where it is installed; it is not an app dependency):
    pypdf         pypdf's extract_text, line ends normalised (the text before any clean-up)
    pypdf+clean   what the app reads: engine.ingest.load_document
    pdfium        pypdfium2's text page, line ends normalised
    pdfium+clean  the same, through engine.ingest.pdf_text's clean-up

Columns:
    ms/pg      extraction time per page
    escapes    glyph names left in the text: /x2A, /uni2022, /g37, (cid:12)
    unjoined   `exam-\\nple` where the document spells `example` elsewhere
    hyph-eol   line-end hyphens between letters still there (compounds like `hand-\\ndrawn` stay)
    ligat      ligature code points (U+FB00-U+FB17)
    spaced     runs of 4+ single letters with spaces between (`W o r d`)
    odd        U+FFFD, U+FFFE, private-use and control characters other than \\t \\n \\f
    glued*     tokens that are two of the other extractor's tokens run together (`[Function]void`):
               disagreement with the other extractor, so it needs both
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from engine.ingest import load_document  # noqa: E402
from engine.ingest._common import clean_text  # noqa: E402
from engine.ingest.pdf_text import (  # noqa: E402
    LINE_END_HYPHEN,
    Vocabulary,
    join_line_end_hyphens,
    normalise_page_text,
)

SAMPLES = REPO / "resources" / "samples" / "docs"
PAGE_SEPARATOR = "\n\n"

_ESCAPE = re.compile(
    r"/(?:x[0-9A-Fa-f]{2}|uni[0-9A-Fa-f]{4,6}|g\d+|G\d+|glyph\d+|cid\d+)(?![0-9A-Za-z_])"
    r"|\(cid:\d+\)"
)
_LIGATURE = re.compile("[\ufb00-\ufb17]")
_SPACED = re.compile(r"(?<!\S)(?:[^\W\d_] ){3,}[^\W\d_](?!\S)")
_ODD = re.compile("[\ufffd\ufffe\ue000-\uf8ff\x00-\x08\x0b\x0e-\x1f\x7f]")
_PDFIUM_HYPHEN = "\ufffe"  # pdfium's mark for a hyphen it took for a line-end break


@dataclass(frozen=True)
class Extracted:
    pages: list[str]
    seconds: float

    @property
    def text(self) -> str:
        return PAGE_SEPARATOR.join(p for p in self.pages if p)


def artifact_counts(text: str) -> dict[str, int]:
    """The artifact counts of one document's text (the columns of the table but glued*)."""
    words = Vocabulary.of([text]).words
    sites = LINE_END_HYPHEN.findall(text)
    return {
        "escapes": len(_ESCAPE.findall(text)),
        "unjoined": sum((left + right).lower() in words for left, right in sites),
        "hyph-eol": len(sites),
        "ligat": len(_LIGATURE.findall(text)),
        "spaced": len(_SPACED.findall(text)),
        "odd": len(_ODD.findall(text)),
    }


def glued_count(text: str, reference: str) -> int:
    """Tokens of `text` the reference does not have but spells as two of its tokens."""
    ref = set(reference.split())
    return sum(
        token not in ref and any(_both_in(token[:i], token[i:], ref) for i in range(1, len(token)))
        for token in text.split()
    )


def _both_in(head: str, tail: str, ref: set[str]) -> bool:
    # a part without a letter or digit is punctuation the other extractor spaced off (`word .`)
    return head in ref and tail in ref and _has_alnum(head) and _has_alnum(tail)


def _has_alnum(s: str) -> bool:
    return any(ch.isalnum() for ch in s)


# -- extractors ----------------------------------------------------------------------------


def pypdf_raw(path: Path) -> Extracted:
    from pypdf import PdfReader

    started = time.perf_counter()
    pages = [clean_text(page.extract_text()).strip() for page in PdfReader(path).pages]
    return Extracted(pages, time.perf_counter() - started)


def pypdf_clean(path: Path) -> Extracted:
    started = time.perf_counter()
    doc = load_document(path)
    pages = [doc.text[s.start : s.end] for s in doc.segments]
    return Extracted(pages, time.perf_counter() - started)


def pdfium_raw(path: Path) -> Extracted:
    import pypdfium2 as pdfium

    started = time.perf_counter()
    pdf = pdfium.PdfDocument(path)
    pages = []
    try:
        for i in range(len(pdf)):
            page = pdf[i]
            textpage = page.get_textpage()
            pages.append(clean_text(textpage.get_text_range()).strip())
            textpage.close()
            page.close()
    finally:
        pdf.close()
    return Extracted(pages, time.perf_counter() - started)


def pdfium_clean(path: Path) -> Extracted:
    raw = pdfium_raw(path)
    started = time.perf_counter()
    # pdfium drops the line break after a hyphen it marks: put both back and let the
    # clean-up decide, as for pypdf (pdfium marks `hand-drawn` and `Fig-color` too)
    pages = [normalise_page_text(p.replace(_PDFIUM_HYPHEN, "-\n")) for p in raw.pages]
    return Extracted(join_line_end_hyphens(pages), raw.seconds + time.perf_counter() - started)


def extractors() -> dict[str, Callable[[Path], Extracted]]:
    found: dict[str, Callable[[Path], Extracted]] = {"pypdf": pypdf_raw, "pypdf+clean": pypdf_clean}
    try:
        import pypdfium2  # noqa: F401
    except ImportError:
        print("(pypdfium2 is not installed: no pdfium rows)", file=sys.stderr)
    else:
        found |= {"pdfium": pdfium_raw, "pdfium+clean": pdfium_clean}
    return found


# -- the table -------------------------------------------------------------------------------

COLUMNS = ["pages", "chars", "ms/pg", "escapes", "unjoined", "hyph-eol", "ligat", "spaced", "odd", "glued*"]


def rows_for(path: Path) -> list[tuple[str, dict[str, int | float]]]:
    results = {name: extract(path) for name, extract in extractors().items()}
    rows = []
    for name, got in results.items():
        other = _counterpart(name, results)
        row: dict[str, int | float] = {
            "pages": sum(1 for p in got.pages if p),
            "chars": len(got.text),
            "ms/pg": round(1000 * got.seconds / max(1, len(got.pages)), 1),
            **artifact_counts(got.text),
            "glued*": glued_count(got.text, results[other].text) if other else "-",
        }
        rows.append((name, row))
    return rows


def _counterpart(name: str, results: dict[str, Extracted]) -> str | None:
    """pypdf is compared with pdfium and back, raw with raw and clean with clean."""
    engine, _, stage = name.partition("+")
    other = ("pdfium" if engine == "pypdf" else "pypdf") + (f"+{stage}" if stage else "")
    return other if other in results else None


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(SAMPLES.glob("*.pdf"))
    print("| pdf | extractor | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for path in paths:
        for name, row in rows_for(path):
            print(
                f"| {path.name} | {name} | "
                + " | ".join(f"{row[c]:,}" if isinstance(row[c], int) else str(row[c]) for c in COLUMNS)
                + " |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
