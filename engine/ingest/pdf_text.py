"""Clean-up of the text a PDF extractor gives: glyph-name escapes, ligatures, line-end hyphens.

Each step is conservative: it changes text only where the PDF's own typesetting put an
artifact there, and leaves anything it cannot tell apart from real text as it was.

    normalise_page_text(text)       one page: line ends, control characters, escapes, ligatures
    join_line_end_hyphens(pages)    the whole document: `exam-\\nple` -> `example` where safe
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from engine.ingest._common import clean_text

# A run of letters in any script, no digits or underscores. Possessive, and every pattern
# starts it where a run starts: a page of a million letters must not backtrack (quadratic).
_LETTERS = r"[^\W\d_]++"
_RUN_START = r"(?<![^\W\d_])"

# Latin and Armenian presentation-form ligatures (U+FB00-U+FB17) become their plain letters,
# as NFKC spells them; NFKC on the whole text would also rewrite µ, ², … and full-width forms.
_LIGATURES = str.maketrans(
    {
        cp: unicodedata.normalize("NFKC", chr(cp))
        for cp in range(0xFB00, 0xFB18)
        if unicodedata.normalize("NFKC", chr(cp)) != chr(cp)
    }
)
_SOFT_HYPHEN = "\u00ad"

# pypdf writes a glyph it cannot map to Unicode as its glyph name: `/x2A` (a TeX Type3 font's
# name for code 0x2A, '*') or `/uni2022` (Adobe's name for U+2022). Both spell the character.
# Only a name that ends there is taken, so `/x2Afile` or `/unique` stay as they are.
_HEX_GLYPH = re.compile(r"/x([0-9A-Fa-f]{2})(?![0-9A-Za-z_])")
_UNI_GLYPH = re.compile(r"/uni([0-9A-F]{4})(?![0-9A-Za-z_])")

# A hyphen that ends a line between two runs of letters: `left-\nright` (groups 1 and 2).
LINE_END_HYPHEN = re.compile(rf"(?<!\w)({_LETTERS})-\n({_LETTERS})")
_WORD = re.compile(_LETTERS)
_COMPOUND = re.compile(rf"{_RUN_START}{_LETTERS}(?:-{_LETTERS})++")
# Next to these, a fragment is a path, an option or an identifier (`--with-\nmpfr`, `a_b-\nc2`).
_CODE_BEFORE = frozenset("-_/\\.@")
_CODE_AFTER = frozenset("-_/\\@")


def normalise_page_text(text: str) -> str:
    """One page's text with \\n line ends, no control characters, glyph names spelled as
    characters, ligatures as plain letters and soft hyphens gone (joined at a line end)."""
    text = clean_text(text)
    text = _HEX_GLYPH.sub(_glyph_char, text)
    text = _UNI_GLYPH.sub(_glyph_char, text)
    text = text.replace(_SOFT_HYPHEN + "\n", "").replace(_SOFT_HYPHEN, "")  # a discretionary break
    return text.translate(_LIGATURES)


def _glyph_char(m: re.Match[str]) -> str:
    ch = chr(int(m.group(1), 16))
    # a control character or a lone surrogate is no text: keep the name, it at least says something
    return ch if ch.isprintable() else m.group(0)


@dataclass(frozen=True)
class Vocabulary:
    """The words and hyphenated compounds a document spells on one line, lower case."""

    words: frozenset[str]
    compounds: frozenset[str]  # `well-known`, and each adjacent pair of a longer compound
    heads: frozenset[str]  # the parts before a compound's hyphens: `well`, `user`, `non`
    tails: frozenset[str]  # the parts after them: `known`, `in`

    @classmethod
    def of(cls, texts: Iterable[str]) -> Vocabulary:
        words: set[str] = set()
        compounds: set[str] = set()
        heads: set[str] = set()
        tails: set[str] = set()
        for text in texts:
            # the fragments of a line-end hyphen are no evidence of anything: leave them out
            text = LINE_END_HYPHEN.sub(" ", text).lower()
            words.update(_WORD.findall(text))
            for compound in _COMPOUND.findall(text):
                parts = compound.split("-")
                compounds.update(f"{a}-{b}" for a, b in zip(parts, parts[1:]))
                heads.update(parts[:-1])
                tails.update(parts[1:])
        return cls(frozenset(words), frozenset(compounds), frozenset(heads), frozenset(tails))


def join_line_end_hyphens(pages: list[str]) -> list[str]:
    """Each page with its line-end hyphens resolved against the words of the whole document.

    `left-\\nright` becomes
      `left-right` when the document writes that compound elsewhere (`well-\\nknown`),
      `leftright`  when it writes that word elsewhere (`exam-\\nple`, `Sci-\\nDAC`),
      `leftright`  when, with no such evidence, both sides are lower case (a capital first
                   letter allowed), not both halves are words of their own, neither half is
                   hyphenated elsewhere and the hyphen is not in code (`instruc-\\ntions`),
    and stays as it was otherwise (`hand-\\ndrawn`, `user-\\ncontrollable`, `--with-\\nmpfr`).
    A hyphen anywhere but at a line end is never touched.
    """
    vocabulary = Vocabulary.of(pages)
    return [LINE_END_HYPHEN.sub(lambda m: _resolve(m, vocabulary), page) for page in pages]


def _resolve(m: re.Match[str], vocabulary: Vocabulary) -> str:
    left, right = m.group(1), m.group(2)
    if f"{left}-{right}".lower() in vocabulary.compounds:
        return f"{left}-{right}"
    if (left + right).lower() in vocabulary.words:
        return left + right
    if _looks_like_a_broken_word(left, right, vocabulary) and not _in_code(m):
        return left + right
    return m.group(0)


def _looks_like_a_broken_word(left: str, right: str, vocabulary: Vocabulary) -> bool:
    if not (right.islower() and (left.islower() or left.istitle())):
        return False
    left, right = left.lower(), right.lower()
    # two words of their own (`hand-\ndrawn`, `out-\nput`) may be a compound: no guess
    if left in vocabulary.words and right in vocabulary.words:
        return False
    # a part the document hyphenates elsewhere (`user-contributed`) may be one here (`user-\ncontrollable`)
    return left not in vocabulary.heads and right not in vocabulary.tails


def _in_code(m: re.Match[str]) -> bool:
    """The hyphen sits in a path, an option or an identifier rather than in prose."""
    text = m.string
    before = text[m.start() - 1] if m.start() > 0 else ""
    after = text[m.end()] if m.end() < len(text) else ""
    return before in _CODE_BEFORE or after in _CODE_AFTER or after.isdigit()
