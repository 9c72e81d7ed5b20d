"""The question box and its presets."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QWidget

PRESETS = (
    "Summarize this document",
    "List the key points",
    "Explain what this code base does",
    "Where is X handled?",
)
PLACEHOLDER = "X"  # the part of a preset the user is meant to replace
_PROMPT_ITEM = "Presets…"


class QuestionBar(QWidget):
    changed = Signal(str)
    submitted = Signal()  # Enter in the question box

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QLineEdit()
        self.edit.setObjectName("question")
        self.edit.setPlaceholderText("Ask a question about the document")
        self.edit.setClearButtonEnabled(True)
        self.edit.textChanged.connect(self.changed)
        self.edit.returnPressed.connect(self.submitted)
        self.presets = QComboBox()
        self.presets.setObjectName("presets")
        self.presets.addItem(_PROMPT_ITEM)
        self.presets.addItems(PRESETS)
        self.presets.activated.connect(self._on_preset)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Question:"))
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.presets)

    @property
    def question(self) -> str:
        return self.edit.text().strip()

    def set_question(self, text: str) -> None:
        self.edit.setText(text)

    def apply_preset(self, preset: str) -> None:
        self.edit.setText(preset)
        self.edit.setFocus()
        # Select the placeholder word so typing replaces it.
        words = preset.rstrip("?").split(" ")
        if PLACEHOLDER in words:
            self.edit.setSelection(preset.index(f" {PLACEHOLDER} ") + 1, len(PLACEHOLDER))

    def _on_preset(self, index: int) -> None:
        if index > 0:
            self.apply_preset(self.presets.itemText(index))
        self.presets.setCurrentIndex(0)  # the combo is a menu of shortcuts, not a state
