"""Files a question names (engine.pipeline.named_files) are kept first (engine.draft.selection's focus):
the names by hand and by property, the selection by hand, then the tiny engine end to end, where the
definitions a question names (engine.pipeline.named_definitions) come first too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from engine.core.events import Notice, RunFinished, RunResult, SelectionMade
from engine.core.settings import RunSettings
from engine.draft.selection import select_chunks
from engine.eval.labels import selection_note
from engine.ingest.document import Document, Segment
from engine.ingest.folder import file_header
from engine.pipeline.named_files import file_names, named_files
from tests.fixtures.kept_parts import kept_segment_labels

LABELS = [
    "LICENSE-MIT",
    "src/structlog/__init__.py",
    "src/structlog/_output.py",
    "src/structlog/stdlib.py",
    "src/structlog/dev.py",
    "src/structlog/twisted.py",
    "tests/__init__.py",
    "docs/__init__.py",
    "examples/__init__.py",
]
FILES = [Segment(label, "file", 10 * i, 10 * i + 10) for i, label in enumerate(LABELS)]


def named(question: str) -> list[str]:
    return [LABELS[i] for i in named_files(question, FILES)]


def test_a_file_is_named_by_its_path_or_a_trailing_part_of_it():
    assert named("In src/structlog/_output.py, which helper returns the lock?") == [
        "src/structlog/_output.py"
    ]
    assert named("Which helper in _output.py returns the lock?") == ["src/structlog/_output.py"]
    assert named("What does structlog/dev.py define?") == ["src/structlog/dev.py"]
    assert named("the Twisted integration (src/structlog/twisted.py), which class") == [
        "src/structlog/twisted.py"
    ]
    assert named("Which class is in twisted.py.") == ["src/structlog/twisted.py"]  # a full stop may follow


def test_a_file_is_named_by_a_dotted_module_path_of_two_names_or_more():
    assert named("Which class does structlog.stdlib.LoggerFactory install?") == ["src/structlog/stdlib.py"]
    assert named("Which logger class does stdlib install?") == []  # one bare word names nothing
    assert named("What does the structlog package export?") == []


def test_a_name_inside_a_longer_one_or_shared_by_many_files_names_nothing():
    assert named("What does my_output.py do?") == []
    assert named("What does src/structlog/_output.pyc hold?") == []
    assert named("What does mystructlog.stdlib hold?") == []
    assert named("Which of the __init__.py files imports dev?") == []  # four files share that name
    assert named("What does tests/__init__.py hold?") == ["tests/__init__.py"]


def test_pages_and_plain_text_are_never_named():
    pages = [Segment("page 3", "page", 0, 10), Segment("text", "text", 10, 20)]
    assert named_files("What is on page 3 of the text?", pages) == []


def test_the_names_of_a_path():
    assert list(file_names("src/pkg/mod.py")) == ["src/pkg/mod.py", "pkg/mod.py", "mod.py", "pkg.mod"]
    assert list(file_names("lib/a/b/__init__.py")) == [
        "lib/a/b/__init__.py",
        "a/b/__init__.py",
        "b/__init__.py",
        "__init__.py",
        "a.b",
    ]


NAME = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)


@hsettings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(NAME, min_size=1, max_size=3).map(lambda p: "/".join(p) + ".py"),
        min_size=1,
        max_size=8,
        unique=True,
    ),
    st.data(),
)
def test_a_question_that_quotes_a_files_path_always_names_it(labels, data):
    segments = [Segment(label, "file", i, i + 1) for i, label in enumerate(labels)]
    pick = data.draw(st.integers(0, len(labels) - 1))
    assert pick in named_files(f"In {labels[pick]}, what is defined?", segments)


# -- the selection --------------------------------------------------------------------------------------


def test_a_named_files_best_chunks_come_first_up_to_half_the_budget():
    scores = np.array([5, 9, 8, 7, 6, 0.1, 0.3, 0.2, 0.4, 4, 3, 2], dtype=float)  # 12 chunks, budget 6
    assert select_chunks(scores, 0.5, [0]) == [0, 1, 2, 3, 4, 9]
    focused = select_chunks(scores, 0.5, [0], focus=[(5, 9)])
    # Half of the five free places (two) go to the named file's best chunks (8, then 6); the top scores fill the rest.
    assert focused == [0, 1, 2, 3, 6, 8]


def test_a_small_named_file_is_kept_whole():
    scores = np.array([5, 9, 8, 7, 6, 0.1, 0.3, 4, 3, 2], dtype=float)
    assert select_chunks(scores, 1.0, [0], max_chunks=6, focus=[(5, 7)]) == [0, 1, 2, 3, 5, 6]


def test_the_json_and_the_note_name_the_focused_files_only_when_there_are_some():
    plain = RunResult(
        run="spec",
        answer="a",
        prompt_tokens=10,
        prefill_tokens=2,
        ttft_s=1,
        decode_tok_s=1,
        generated_tokens=1,
        tokenize_s=0,
        target_prefill_s=1,
        kept_fraction=0.2,
    )
    assert "focused_parts" not in plain.to_json() and selection_note(plain) == ""
    focused = RunResult(**{**plain.__dict__, "focused_parts": ["src/a.py"]})
    assert focused.to_json()["focused_parts"] == ["src/a.py"]
    assert selection_note(focused) == "src/a.py kept first (named in the question)"


# -- the tiny engine end to end ---------------------------------------------------------------------------

MODULES = {
    f"pkg/mod{i}.py": "".join(f"def helper_{i}_{j}(x):\n    return x + {j}\n\n" for j in range(40))
    for i in range(5)
}


def folder_document() -> Document:
    """The modules as a folder is read: each file under its header line."""
    text, segments = "", []
    for label, body in MODULES.items():
        chunk = file_header(label) + body
        segments.append(Segment(label, "file", len(text), len(text) + len(chunk)))
        text += chunk
    return Document(Path("pkg"), "folder", text, segments)


def focus_run(engine, question: str, **settings):
    """The result, the notices, and the files some kept chunk starts in."""
    document = folder_document()
    events = list(
        engine.stream(
            document,
            question,
            "spec",
            RunSettings(max_new_tokens=2, force=True, chunk_size=8, keep=0.1, coverage="off", **settings),
        )
    )
    (result,) = [e.result for e in events if isinstance(e, RunFinished)]
    (selection,) = [e.selection for e in events if isinstance(e, SelectionMade)]
    return (
        result,
        [e.message for e in events if isinstance(e, Notice)],
        kept_segment_labels(document, selection),
    )


def test_a_named_file_is_kept_and_said_so(engine):
    question = "In pkg/mod3.py, which helper adds 7?"
    result, notices, files = focus_run(engine, question)
    assert result.focused_parts == ["pkg/mod3.py"] and "pkg/mod3.py" in files
    assert "the question names pkg/mod3.py: its best chunks were kept first" in notices
    off, off_notices, _ = focus_run(engine, question, named_files="off")
    assert off.focused_parts == [] and not any("names pkg" in n for n in off_notices)
    plain, _, _ = focus_run(engine, "Which helper adds 7?")
    assert plain.focused_parts == []


def test_a_named_definition_is_kept_before_the_files_and_said_so(engine):
    document = folder_document()
    result, notices, _ = focus_run(engine, "In pkg/mod1.py, what does helper_3_7 return?")
    assert result.focused_parts == ["helper_3_7 in pkg/mod3.py", "pkg/mod1.py"]
    assert (
        "the question names helper_3_7 in pkg/mod3.py, pkg/mod1.py: their best chunks were kept first"
        in notices
    )
    kept_text = kept_document_text(engine, document, "What does helper_3_7 return?")
    assert "def helper_3_7(x):\n    return x + 7\n" in kept_text


def kept_document_text(engine, document: Document, question: str) -> str:
    """The document's text with every char no kept chunk holds blanked out (NUL)."""
    events = list(
        engine.stream(
            document,
            question,
            "spec",
            RunSettings(max_new_tokens=2, force=True, chunk_size=8, keep=0.1, coverage="off"),
        )
    )
    (selection,) = [e.selection for e in events if isinstance(e, SelectionMade)]
    offsets, size = selection.token_char_offsets, selection.chunk_size
    doc_start, doc_end = selection.doc_char_span
    kept = bytearray(len(document.text))
    for chunk in selection.kept_chunks:
        first, last = chunk * size, min((chunk + 1) * size, len(offsets))
        start = max(offsets[first], doc_start)
        end = min(offsets[last] if last < len(offsets) else doc_end, doc_end)
        kept[start - doc_start : max(end, start) - doc_start] = b"\1" * (max(end, start) - start)
    return "".join(ch if mark else "\0" for ch, mark in zip(document.text, kept))
