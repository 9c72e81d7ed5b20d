"""A/B suite files: one JSON object per line, each a question about a document.

    {"id": "xfig-grid", "doc": "../docs/xfig-howto.pdf", "kind": "number",
     "question": "How many divisions to an inch does the XFig grid have?",
     "answers": ["sixteen", "16"]}

`doc` is relative to the suite file (or absolute): a PDF, a text file or a code folder. A doc that
names a sample code base (`../samples/code/toolz-core`: a folder beside samples.json that lists it)
is that sample's folder as engine.core.samples extracts it from its archive into the user cache.
`answers` is optional (a case without answers is scored by agreement only). A summary case may
list `key_points`, each a list of alternative phrases (`[["checkpoint", "checkpointing"],
["Hydra"]]`): its answer is scored by the share of points it mentions. `kind` is a
free label used to group results and defaults to "other". Blank lines and lines starting
with `#` are skipped. Every problem is a SuiteError that starts with "FILE:LINE: ".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.core.errors import CacheError, SpecPrefillError
from engine.core.samples import SampleError, sample_at

DEFAULT_KIND = "other"
REQUIRED_FIELDS = ("id", "doc", "question")
KNOWN_FIELDS = frozenset({*REQUIRED_FIELDS, "answers", "kind", "key_points"})


class SuiteError(SpecPrefillError):
    """The suite file is missing or one of its lines is not a valid case."""


@dataclass(frozen=True)
class Case:
    id: str
    doc: Path  # resolved against the suite file's folder
    question: str
    answers: tuple[str, ...] | None  # None: no expected answer, scored by agreement only
    kind: str
    line: int  # 1-based line in the suite file, for messages
    key_points: tuple[tuple[str, ...], ...] | None = (
        None  # each point's alternative phrases; None: not scored so
    )


def load_suite(path: str | Path) -> list[Case]:
    """Every case in the suite file, in file order."""
    suite = Path(path)
    try:
        text = suite.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise SuiteError(f"no such suite file: {suite}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteError(f"cannot read suite file {suite}: {e}") from e
    cases = parse_suite(text.splitlines(), suite)
    if not cases:
        raise SuiteError(f"{suite}: no cases (every line is blank or a comment)")
    return cases


def parse_suite(lines: list[str], suite: Path) -> list[Case]:
    """Parse the lines of `suite`; doc paths resolve against its folder."""
    cases: list[Case] = []
    first_line_of: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        if _is_skipped(raw):
            continue
        where = f"{suite}:{number}"
        case = _parse_case(raw, number, where, suite.parent)
        if case.id in first_line_of:
            raise SuiteError(
                f"{where}: duplicate id {case.id!r} (first used on line {first_line_of[case.id]})"
            )
        first_line_of[case.id] = number
        cases.append(case)
    return cases


def _is_skipped(raw: str) -> bool:
    stripped = raw.strip()
    return not stripped or stripped.startswith("#")


def _parse_case(raw: str, number: int, where: str, base: Path) -> Case:
    obj = _parse_object(raw, where)
    unknown = sorted(set(obj) - KNOWN_FIELDS)
    if unknown:
        # A typo such as "answer" would otherwise silently drop the expected answers.
        raise SuiteError(
            f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(sorted(KNOWN_FIELDS))})"
        )
    for name in REQUIRED_FIELDS:
        _require_text(obj, name, where)
    return Case(
        id=obj["id"].strip(),
        doc=_resolve_doc(obj["doc"], base, where),
        question=obj["question"],
        answers=_parse_answers(obj.get("answers"), where),
        kind=_parse_kind(obj.get("kind"), where),
        line=number,
        key_points=_parse_key_points(obj.get("key_points"), where),
    )


def _parse_object(raw: str, where: str) -> dict:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        raise SuiteError(f"{where}: invalid JSON: {e.msg} (column {e.colno})") from e
    if not isinstance(obj, dict):
        raise SuiteError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _require_text(obj: dict, name: str, where: str) -> None:
    if name not in obj:
        raise SuiteError(f"{where}: missing field {name!r}")
    if not isinstance(obj[name], str) or not obj[name].strip():
        raise SuiteError(f"{where}: field {name!r} must be a non-empty string")


def _resolve_doc(doc: str, base: Path, where: str) -> Path:
    path = (base / Path(doc).expanduser()).resolve()
    try:
        sample = sample_at(path)  # "../samples/code/toolz-core": a sample code base, kept as an archive
    except (SampleError, CacheError) as e:
        raise SuiteError(f"{where}: {e}") from e
    if sample is not None:
        return sample
    if not path.exists():
        raise SuiteError(f"{where}: document not found: {doc} (looked for {path})")
    return path


def _parse_answers(answers: object, where: str) -> tuple[str, ...] | None:
    if answers is None:
        return None
    if (
        not isinstance(answers, list)
        or not answers
        or not all(isinstance(a, str) and a.strip() for a in answers)
    ):
        raise SuiteError(f"{where}: field 'answers' must be a non-empty list of non-empty strings")
    return tuple(answers)


def _parse_key_points(points: object, where: str) -> tuple[tuple[str, ...], ...] | None:
    if points is None:
        return None
    if (
        not isinstance(points, list)
        or not points
        or not all(
            isinstance(p, list) and p and all(isinstance(a, str) and a.strip() for a in p) for p in points
        )
    ):
        raise SuiteError(
            f"{where}: field 'key_points' must be a non-empty list of non-empty lists of phrases"
        )
    return tuple(tuple(point) for point in points)


def _parse_kind(kind: object, where: str) -> str:
    if kind is None:
        return DEFAULT_KIND
    if not isinstance(kind, str) or not kind.strip():
        raise SuiteError(f"{where}: field 'kind' must be a non-empty string")
    return kind.strip()
