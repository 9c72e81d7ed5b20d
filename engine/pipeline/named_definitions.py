"""Which definitions in a folder's Python files a question names: "the RichTracebackFormatter
dataclass", "what does wrap_dict put ...", "structlog.stdlib.LoggerFactory", "MAX_FRAMES". SpecPrefill
keeps a named definition's code first, before a named file's best chunks: a question about a class or
a function is answered from its definition, and one that names no file often names one of those.

Definitions are read with `ast`: classes, functions and methods, and names assigned in a module or a
class body, each spanning exactly its lines (decorators included). Files in other languages, and
Python that does not parse, define nothing here. A bare name counts only when it reads as code rather
than as a word: it holds an underscore, a digit or a capital after its first letter, or the question
writes it `quoted` or as a call; a qualified "Class.method" always counts. A name defined in more than
MAX_PLACES places names none of them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from engine.ingest.document import Segment
from engine.ingest.folder import file_header

MAX_PLACES = 3
MIN_NAME_CHARS = 3


@dataclass(frozen=True)
class Definition:
    name: str  # qualified within its file: "LoggerFactory", "LoggerFactory.__call__"
    path: str  # the file's label
    start: int  # char span in the document text
    end: int

    @property
    def label(self) -> str:
        return f"{self.name} in {self.path}"


def named_definitions(question: str, document: str, segments: Sequence[Segment]) -> list[Definition]:
    """The definitions the question names, in document order."""
    index = definitions_by_name(document, tuple(segments))
    named = {
        d
        for name in written_names(question)
        if name in index and len(index[name]) <= MAX_PLACES and ("." in name or reads_as_code(question, name))
        for d in index[name]
    }
    return sorted(named, key=lambda d: (d.start, -d.end))


def written_names(question: str) -> set[str]:
    """Every identifier the question writes, and every dotted run of them: "pkg.mod.Cls" gives "pkg",
    "mod", "Cls", "pkg.mod", "mod.Cls" and "pkg.mod.Cls"."""
    names = set()
    for dotted in re.findall(r"(?<![\w.])[^\W\d]\w*(?:\.[^\W\d]\w*)*", question):
        parts = dotted.split(".")
        names.update(".".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1))
    return names


def reads_as_code(question: str, name: str) -> bool:
    if len(name) < MIN_NAME_CHARS:
        return False
    if re.search(r"[_\d]|.[A-Z]", name):
        return True
    return re.search(rf"`{re.escape(name)}`|(?<!\w){re.escape(name)}\(", question) is not None


@lru_cache(maxsize=2)  # a session asks many questions of one document
def definitions_by_name(document: str, segments: tuple[Segment, ...]) -> dict[str, list[Definition]]:
    """Every Python file's definitions, under their qualified name and, for a nested one, also under its
    own name ("LoggerFactory.__call__" and "__call__")."""
    index: dict[str, list[Definition]] = {}
    for segment in segments:
        if segment.kind != "file" or not segment.label.endswith((".py", ".pyi")):
            continue
        header = file_header(segment.label)
        body_start = segment.start + (len(header) if document.startswith(header, segment.start) else 0)
        for name, start, end in python_definitions(document[body_start : segment.end]):
            definition = Definition(name, segment.label, body_start + start, body_start + end)
            for key in {name, name.rpartition(".")[2]}:
                index.setdefault(key, []).append(definition)
    return index


def python_definitions(source: str) -> list[tuple[str, int, int]]:
    """(qualified name, char start, char end) of each definition in one Python file; none when it does
    not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    line_starts = [0, *(m.end() for m in re.finditer("\n", source))]

    def span(node: ast.AST) -> tuple[int, int]:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        last = node.end_lineno or node.lineno
        end = line_starts[last] if last < len(line_starts) else len(source)
        return line_starts[first - 1], end

    return [(name, *span(node)) for name, node in _walk_definitions(tree.body, "")]


def _walk_definitions(body: list[ast.stmt], scope: str) -> Iterator[tuple[str, ast.AST]]:
    """Classes and functions (and the classes' methods), and the names a module or class body assigns."""
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield scope + node.name, node
            if isinstance(node, ast.ClassDef):
                yield from _walk_definitions(node.body, f"{scope}{node.name}.")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    yield scope + target.id, node
