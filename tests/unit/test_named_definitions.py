"""Definitions a question names (engine.pipeline.named_definitions): spans read from Python by hand,
names by hand and by property, and their place before the named files in the selection."""

from __future__ import annotations

import keyword

import numpy as np
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from engine.draft.selection import select_chunks
from engine.ingest.document import Segment
from engine.ingest.folder import file_header
from engine.pipeline.named_definitions import named_definitions, python_definitions, written_names

MODULE = '''"""A module."""
import logging

MAX_FRAMES = 50
WRITE_LOCKS: dict = {}


@dataclass
class RichFormatter:
    color_system: str = "truecolor"

    def render(self, x):
        return x


def wrap_dict(cls):
    return type("WrappedDict-" + "id", (cls,), {})
'''


def spans(source: str) -> dict[str, str]:
    return {name: source[start:end] for name, start, end in python_definitions(source)}


def test_definitions_span_their_lines_decorators_included():
    found = spans(MODULE)
    assert list(found) == [
        "MAX_FRAMES",
        "WRITE_LOCKS",
        "RichFormatter",
        "RichFormatter.color_system",
        "RichFormatter.render",
        "wrap_dict",
    ]
    assert found["MAX_FRAMES"] == "MAX_FRAMES = 50\n"
    assert found["RichFormatter"].startswith("@dataclass\nclass RichFormatter:\n")
    assert found["RichFormatter"].endswith("        return x\n")
    assert found["RichFormatter.color_system"] == '    color_system: str = "truecolor"\n'
    assert found["wrap_dict"] == 'def wrap_dict(cls):\n    return type("WrappedDict-" + "id", (cls,), {})\n'


def test_python_that_does_not_parse_defines_nothing():
    assert python_definitions("def broken(:\n    pass\n") == []
    assert python_definitions("print 'python 2'\n") == []


def folder(files: dict[str, str]) -> tuple[str, list[Segment]]:
    """A document as a folder is read: each file under its header line."""
    text, segments = "", []
    for label, body in files.items():
        chunk = file_header(label) + body
        segments.append(Segment(label, "file", len(text), len(text) + len(chunk)))
        text += chunk
    return text, segments


FILES = {
    "README.md": "class NotPython:\n    wrap_dict = 1\n",
    "src/pkg/dev.py": MODULE,
    "src/pkg/twisted.py": "class RichFormatter:\n    pass\n\n\ndef render(x):\n    return x\n",
    **{f"src/pkg/m{i}.py": "def __repr__(self):\n    return ''\n\n\nprocess = None\n" for i in range(4)},
}
TEXT, SEGMENTS = folder(FILES)


def named(question: str) -> list[str]:
    return [d.label for d in named_definitions(question, TEXT, SEGMENTS)]


def test_the_names_a_question_writes():
    assert written_names("Does pkg.mod.Cls call `f`? See MAX_2.") == {
        "Does",
        "pkg",
        "mod",
        "Cls",
        "pkg.mod",
        "mod.Cls",
        "pkg.mod.Cls",
        "call",
        "f",
        "See",
        "MAX_2",
    }
    assert written_names("3.14 or x1.y") == {"or", "x1", "y", "x1.y"}


def test_a_definition_is_named_by_a_name_that_reads_as_code():
    assert named("What does wrap_dict put in front of the id?") == ["wrap_dict in src/pkg/dev.py"]
    assert named("What is the value of MAX_FRAMES?") == ["MAX_FRAMES in src/pkg/dev.py"]
    assert named("What is the default color_system?") == ["RichFormatter.color_system in src/pkg/dev.py"]
    # CamelCase, qualified by its module: both classes of that name (two places, not too many).
    assert named("Which class does pkg.dev.RichFormatter extend?") == [
        "RichFormatter in src/pkg/dev.py",
        "RichFormatter in src/pkg/twisted.py",
    ]
    # A qualified name names the method, and its class by the name that qualifies it.
    assert named("What does RichFormatter.render return?") == [
        "RichFormatter in src/pkg/dev.py",
        "RichFormatter.render in src/pkg/dev.py",
        "RichFormatter in src/pkg/twisted.py",
    ]


def test_a_plain_word_names_a_definition_only_when_written_as_code():
    assert named("How does the app render a page?") == []
    assert named("What does `render` return?") == [
        "RichFormatter.render in src/pkg/dev.py",
        "render in src/pkg/twisted.py",
    ]
    assert named("What does render(x) return?") == named("What does `render` return?")


def test_a_name_defined_in_many_places_inside_a_longer_one_or_outside_python_names_nothing():
    assert named("Which __repr__ returns an empty string?") == []  # four files define it
    assert named("Is `process` ever set?") == []
    assert named("What does wrap_dicts do?") == [] and named("What does my_wrap_dict do?") == []
    assert named("Which class is NotPython?") == []  # README.md is not Python


IDENT = st.from_regex(r"[a-z]{2,6}_[a-z0-9]{1,4}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))


@hsettings(max_examples=100, deadline=None)
@given(st.lists(IDENT, min_size=1, max_size=8, unique=True), st.data())
def test_a_question_that_quotes_a_defined_function_always_names_its_definition(functions, data):
    body = "".join(f"def {name}(x):\n    return x\n\n\n" for name in functions)
    text, segments = folder({"pkg/mod.py": body})
    pick = data.draw(st.sampled_from(functions))
    found = named_definitions(f"What does {pick} return?", text, segments)
    assert [text[d.start : d.end] for d in found] == [f"def {pick}(x):\n    return x\n"]


def test_named_definitions_come_before_named_files_in_the_selection():
    scores = np.array([5, 9, 8, 7, 6, 0.1, 0.3, 0.2, 0.4, 4, 0.05, 0.01], dtype=float)  # 12 chunks, budget 6
    # Two free places go to focus: the definition (chunk 10), then the file's best chunk (8).
    assert select_chunks(scores, 0.5, [0], focus=[(5, 9)], definitions=[(10, 11)]) == [0, 1, 2, 3, 8, 10]
    assert select_chunks(scores, 0.5, [0], focus=[(5, 9)], definitions=[(10, 12)]) == [0, 1, 2, 3, 10, 11]
    # A definition inside the named file is picked once.
    assert select_chunks(scores, 0.5, [0], focus=[(5, 9)], definitions=[(8, 9)]) == [0, 1, 2, 3, 6, 8]
