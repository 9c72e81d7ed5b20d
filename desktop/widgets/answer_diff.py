"""Compare the two answers: a word diff, or either answer alone, switched with one click."""

from __future__ import annotations

import difflib
import html
import re

from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QLabel,
    QRadioButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from desktop.widgets.theme import highlight_css

WAITING_FOR_BOTH = "The differences show once both runs have answered the same question."
_WORDS = re.compile(r"\s+|[^\s]+")

# (op, text) with op one of "same", "baseline" (only in the full-prefill answer), "spec" (only in SpecPrefill's)
DiffPart = tuple[str, str]


def word_diff(baseline: str, spec: str) -> list[DiffPart]:
    a, b = _WORDS.findall(baseline), _WORDS.findall(spec)
    parts: list[DiffPart] = []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            parts.append(("same", "".join(a[a0:a1])))
            continue
        if a1 > a0:
            parts.append(("baseline", "".join(a[a0:a1])))
        if b1 > b0:
            parts.append(("spec", "".join(b[b0:b1])))
    return parts


DIFF_STYLES = {
    "same": "",
    "baseline": highlight_css("#ffd7d5", " text-decoration:line-through;"),
    "spec": highlight_css("#ccffd8"),
}


def diff_html(parts: list[DiffPart]) -> str:
    spans = []
    for op, text in parts:
        escaped = html.escape(text).replace("\n", "<br>")
        spans.append(f'<span style="{DIFF_STYLES[op]}">{escaped}</span>' if DIFF_STYLES[op] else escaped)
    return "".join(spans)


class AnswerCompareView(QWidget):
    MODES = ("diff", "baseline", "spec")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._answers = {"baseline": "", "spec": ""}
        self.browser = QTextBrowser()
        self.browser.setObjectName("answerCompare")
        self.buttons = {
            "diff": QRadioButton("Differences"),
            "baseline": QRadioButton("Full prefill answer"),
            "spec": QRadioButton("SpecPrefill answer"),
        }
        self.buttons["diff"].setChecked(True)
        group = QButtonGroup(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Show:"))
        for button in self.buttons.values():
            group.addButton(button)
            button.toggled.connect(self._refresh)
            row.addWidget(button)
        legend = QLabel(
            f'<span style="{DIFF_STYLES["baseline"]}">only in full prefill</span>'
            f'&nbsp;&nbsp;<span style="{DIFF_STYLES["spec"]}">only in SpecPrefill</span>'
        )
        row.addStretch(1)
        row.addWidget(legend)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.browser, 1)

    @property
    def mode(self) -> str:
        return next(name for name, button in self.buttons.items() if button.isChecked())

    def set_mode(self, mode: str) -> None:
        self.buttons[mode].setChecked(True)

    def toggle(self) -> None:
        """Flip between the two answers (from the diff, go to the full-prefill answer)."""
        self.set_mode("spec" if self.mode == "baseline" else "baseline")

    def set_answers(self, baseline: str, spec: str) -> None:
        self._answers = {"baseline": baseline, "spec": spec}
        self._refresh()

    def _refresh(self) -> None:
        mode = self.mode
        baseline, spec = self._answers["baseline"], self._answers["spec"]
        if mode != "diff":
            self.browser.setPlainText(self._answers[mode])
        elif baseline and spec:
            self.browser.setHtml(diff_html(word_diff(baseline, spec)))
        else:  # a diff against nothing would paint one whole answer as "removed"
            self.browser.setPlainText(WAITING_FOR_BOTH)
