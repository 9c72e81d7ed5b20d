"""Building A/B suites in the app: new cases from the open document, and saving them as JSONL.

The file format is engine.eval.suite's; a saved suite is parsed back with engine.eval.suite before it
replaces the file, so the app never writes a suite that `specprefill ab` would reject.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine.api import DEFAULT_KIND, Case, parse_suite, write_text_atomic

ANSWER_SEPARATOR = "|"  # answers may contain commas ("sixteen, 16"), rarely a bar
QUICK_CHECK_ID = "quick-check"
QUICK_CHECK_KIND = "quick check"


def parse_answers(text: str) -> tuple[str, ...] | None:
    """'16 | sixteen' -> ('16', 'sixteen'); nothing typed -> None (scored by agreement only)."""
    answers = tuple(part.strip() for part in text.split(ANSWER_SEPARATOR) if part.strip())
    return answers or None


def unique_id(wanted: str, taken: set[str]) -> str:
    """`wanted` itself, or with the first free -2, -3… suffix: suite ids must be unique."""
    if wanted not in taken:
        return wanted
    number = 2
    while f"{wanted}-{number}" in taken:
        number += 1
    return f"{wanted}-{number}"


def id_from_path(path: Path) -> str:
    """A readable default id: the document's name in lower case, runs of other characters as '-'."""
    return re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-") or "case"


def new_case(document: Path, question: str, *, case_id: str, answers_text: str, existing: list[Case]) -> Case:
    """A case for `document` and `question`, appended after `existing` (its line is its place in the file)."""
    taken = {case.id for case in existing}
    wanted = case_id.strip() or id_from_path(document)
    return Case(
        id=unique_id(wanted, taken),
        doc=document.resolve(),
        question=question.strip(),
        answers=parse_answers(answers_text),
        kind=DEFAULT_KIND,
        line=len(existing) + 1,
    )


def quick_check_case(document: Path, question: str) -> Case:
    """The one case of a quick check: no expected answers, so it is scored by agreement alone."""
    return Case(
        id=QUICK_CHECK_ID,
        doc=document.resolve(),
        question=question.strip(),
        answers=None,
        kind=QUICK_CHECK_KIND,
        line=1,
    )


def doc_reference(document: Path, folder: Path) -> str:
    """Relative to the suite's folder when the document lies below it, so both can move together."""
    try:
        return document.relative_to(folder).as_posix()
    except ValueError:
        return str(document)


def case_json(case: Case, folder: Path) -> dict:
    obj = {
        "id": case.id,
        "kind": case.kind,
        "doc": doc_reference(case.doc, folder),
        "question": case.question,
    }
    if case.answers is not None:
        obj["answers"] = list(case.answers)
    if case.key_points is not None:
        obj["key_points"] = [list(point) for point in case.key_points]
    return obj


def render_suite(cases: list[Case], path: Path) -> str:
    folder = path.resolve().parent
    return "".join(json.dumps(case_json(case, folder), ensure_ascii=False) + "\n" for case in cases)


def save_suite(cases: list[Case], path: Path) -> list[Case]:
    """Write the suite atomically and return its cases as the file now gives them (lines, paths).

    Raises SuiteError, leaving any previous file untouched, when the text would not load back.
    """
    text = render_suite(cases, path)
    reloaded = parse_suite(text.splitlines(), path.resolve())
    write_text_atomic(path, text)
    return reloaded
