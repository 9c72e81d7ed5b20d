"""No module of engine/pipeline reaches into another object's private names: `x._name` (a call or
any other access) is for `self` and `cls` only. A collaborator's need is a public method, or a
callable handed in (SpecRun's prefill_and_generate)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[2] / "engine" / "pipeline"
OWN = {"self", "cls"}


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str, filename: str = "<source>") -> list[str]:
    """Each `x._name` in `source` whose `x` is not plain `self` or `cls` (dunders allowed), and each
    getattr/setattr/hasattr/delattr(x, "_name") alike, as "file:line: code"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            target = node.value
        elif _named_attribute_call(node):
            target = node.args[0]
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id in OWN):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def _named_attribute_call(node: ast.AST) -> bool:
    """getattr(x, "_name", ...) and its kin, with a private name written out."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "setattr", "hasattr", "delattr"}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and is_private(node.args[1].value)
    )


@pytest.mark.parametrize(
    "source",
    [
        "runner._draft_scores(request, None)",
        "result = yield from runner._prefill_and_generate(request)",
        "engine._runner",
        "self.runner._segment_parts(request, offsets)",
        "super()._close()",
        "Runner._iter_score(self, prompt)",
        "getattr(engine, '_prefixes')",
        "setattr(other, '_x', 1)",
        "def f(runner):\n    return runner._policy.window_fit(1)",
    ],
)
def test_a_private_use_on_another_object_is_caught(source):
    assert len(private_uses(source)) >= 1


@pytest.mark.parametrize(
    "source",
    [
        "self._draft_scores(request, None)",
        "cls._instances.clear()",
        "self._open_streams.add(events)",
        "obj.__init__()",
        "self.__dict__; other.__class__.__name__",
        "runner.prefill_and_generate(request)",
        "getattr(getattr(engine, self.owner), self.name)",
        "getattr(self, '_x')",
    ],
)
def test_own_names_dunders_and_public_names_pass(source):
    assert private_uses(source) == []


def test_each_finding_names_its_file_line_and_code():
    assert private_uses("x = 1\nrunner._draft_scores()", "a.py") == ["a.py:2: runner._draft_scores"]


def test_no_pipeline_module_uses_another_objects_private_names():
    files = sorted(PIPELINE.glob("*.py"))
    assert files, PIPELINE
    found = [use for path in files for use in private_uses(path.read_text(encoding="utf-8"), path.name)]
    assert found == []
