"""A dismissible banner for errors and notices: never a modal box, never a traceback."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

_STYLES = {
    "error": "background: #f8d7da; color: #58151c; border: 1px solid #f1aeb5;",
    "info": "background: #cfe2ff; color: #052c65; border: 1px solid #9ec5fe;",
}


class ErrorBanner(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.kind = ""
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)  # paths and messages may hold '<'
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.message, 1)
        layout.addWidget(close)
        self.hide()

    @property
    def text(self) -> str:
        return self.message.text() if not self.isHidden() else ""

    def show_error(self, message: str) -> None:
        self._show("error", message)

    def show_info(self, message: str) -> None:
        self._show("info", message)

    def dismiss(self) -> None:
        self.kind = ""
        self.message.clear()
        self.hide()

    def _show(self, kind: str, message: str) -> None:
        self.kind = kind
        self.setStyleSheet(f"QFrame#errorBanner {{ {_STYLES[kind]} }}")
        self.message.setText(message)
        self.show()
