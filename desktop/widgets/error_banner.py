"""A dismissible banner for errors and notices: never a modal box, never a traceback.

An error may carry one action (a button such as "Re-assemble default models"); pressing
it dismisses the banner and calls the action. The words of a failed job come from
desktop.model.failure_text.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton, QWidget

# kind: (background, text, border). The text colour is set on the banner's label and close
# button too: they draw with the theme's text colour otherwise, light on this light background.
_COLORS = {
    "error": ("#f8d7da", "#58151c", "#f1aeb5"),
    "info": ("#cfe2ff", "#052c65", "#9ec5fe"),
}


def banner_style(kind: str) -> str:
    background, text, border = _COLORS[kind]
    return (
        f"QFrame#errorBanner {{ background: {background}; color: {text}; border: 1px solid {border}; }}"
        f" QFrame#errorBanner QLabel, QFrame#errorBanner QToolButton {{ color: {text}; border: none; }}"
    )


# (button text, what pressing it does)
BannerAction = tuple[str, Callable[[], None]]


class ErrorBanner(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.kind = ""
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.PlainText)  # paths and messages may hold '<'
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.action_button = QPushButton()
        self.action_button.clicked.connect(self._run_action)
        self.action_button.hide()
        self._action: Callable[[], None] | None = None
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.message, 1)
        layout.addWidget(self.action_button)
        layout.addWidget(close)
        self.hide()

    @property
    def text(self) -> str:
        return self.message.text() if not self.isHidden() else ""

    def show_error(self, message: str, action: BannerAction | None = None) -> None:
        self._show("error", message, action)

    def show_info(self, message: str) -> None:
        self._show("info", message, None)

    def dismiss(self) -> None:
        self.kind = ""
        self.message.clear()
        self._set_action(None)
        self.hide()

    def _show(self, kind: str, message: str, action: BannerAction | None) -> None:
        self.kind = kind
        self.setStyleSheet(banner_style(kind))
        self.message.setText(message)
        self._set_action(action)
        self.show()

    def _set_action(self, action: BannerAction | None) -> None:
        self._action = action[1] if action else None
        self.action_button.setText(action[0] if action else "")
        self.action_button.setVisible(action is not None)

    def _run_action(self) -> None:
        action = self._action
        self.dismiss()
        if action is not None:
            action()
