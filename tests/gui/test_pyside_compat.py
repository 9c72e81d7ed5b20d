"""The guard against the PySide6 6.12 refcount bug keeps long sessions alive on Python 3.11."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QCheckBox

import desktop  # noqa: F401  (the import applies the guard)


def test_many_void_calls_and_bool_signals_do_not_exhaust_none_or_bools(qtbot):
    box = QCheckBox()
    qtbot.addWidget(box)
    seen = []
    box.toggled.connect(seen.append)
    before = {name: sys.getrefcount(obj) for name, obj in (("None", None), ("True", True), ("False", False))}
    for _ in range(20_000):  # more than None's natural refcount in a small process
        box.setEnabled(True)
        box.toggled.emit(True)
    assert len(seen) == 20_000
    after = {name: sys.getrefcount(obj) for name, obj in (("None", None), ("True", True), ("False", False))}
    assert all(count > 1_000_000 for count in after.values()), (before, after)
