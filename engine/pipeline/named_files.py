"""Which files of a folder a question names: "In src/pkg/_output.py, ...", "... in _output.py",
"pkg.stdlib.LoggerFactory". SpecPrefill keeps a named file's best chunks first (focus), since a
question about a file is answered from that file, whatever the draft's attention found elsewhere.

A file is named by its path or a trailing part of it ("pkg/_output.py", "_output.py"), or by its
dotted module path of two or more names ("pkg.stdlib"; a bare "stdlib" is too common a word). A
name that ends more than MAX_FILES_PER_NAME paths ("__init__.py") names none of them, unless it is a
whole path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import PurePosixPath

from engine.ingest.document import Segment

MAX_FILES_PER_NAME = 3
SOURCE_ROOTS = ("src", "lib")  # folders a dotted module path leaves out


def named_files(question: str, segments: Sequence[Segment]) -> list[int]:
    """Indices of the file segments the question names, ascending."""
    files_by_name: dict[str, set[int]] = {}
    exact: dict[str, int] = {}
    for index, segment in enumerate(segments):
        if segment.kind == "file":
            exact[segment.label] = index
            for name in file_names(segment.label):
                files_by_name.setdefault(name, set()).add(index)
    named: set[int] = set()
    for name, files in files_by_name.items():
        if not mentions(question, name):
            continue
        if name in exact:  # a file's whole path names it alone, however many files end alike
            named.add(exact[name])
        elif len(files) <= MAX_FILES_PER_NAME:
            named |= files
    return sorted(named)


def file_names(label: str) -> Iterator[str]:
    """The path's trailing parts ("a/b/c.py", "b/c.py", "c.py"), then its dotted module paths of two or
    more names ("b.c", and "a.b.c" unless a is a source root)."""
    parts = PurePosixPath(label).parts
    for i in range(len(parts)):
        yield "/".join(parts[i:])
    modules = [*parts[:-1], PurePosixPath(parts[-1]).stem] if parts else []
    if modules and modules[-1] == "__init__":
        modules.pop()  # the package itself: pkg/__init__.py is "pkg"
    if modules and modules[0] in SOURCE_ROOTS:
        modules.pop(0)
    for i in range(len(modules) - 1):
        yield ".".join(modules[i:])


def mentions(question: str, name: str) -> bool:
    """`name` stands in the question as a whole name: not inside a longer identifier or path (a
    trailing full stop or a ".attribute" may follow it)."""
    return re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w/-])", question) is not None
