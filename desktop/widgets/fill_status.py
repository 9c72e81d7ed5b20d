"""The status bar's view of the background full prefill (desktop.sessions.background_fill) of the
active document: one line and, while the draft reads ahead or the target fills, a progress bar."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from desktop.model.doc_threads import (
    FILL_FAILED,
    FILL_FILLING,
    FILL_IDLE,
    FILL_OFF,
    FILL_PAUSED,
    FILL_READING,
    FILL_READY,
    FillState,
)
from engine.api import format_count, format_percent_short

STATUS_WORDS = {
    FILL_OFF: "off",
    FILL_IDLE: "not filled",
    FILL_FILLING: "filling",
    FILL_PAUSED: "paused",
    FILL_READY: "ready",
    FILL_FAILED: "failed",
    FILL_READING: "reading ahead",
}
READY_NOTE = "Follow-ups answer from the full cached document"
OFF_TIP = "Turned off in Settings (Background full prefill)"


def fill_text(state: FillState) -> str:
    """ "Full document cache: 3,072 / 8,192 tokens — filling"; "Reading ahead: 62%" before it."""
    if state.status == FILL_READING:
        share = f": {format_percent_short(state.done / state.total)}" if state.total else ""
        return f"Reading ahead{share}"
    counts = f"{format_count(state.done)} / {format_count(state.total)} tokens — " if state.total else ""
    text = f"Full document cache: {counts}{STATUS_WORDS[state.status]}"
    return f"{text}. {READY_NOTE}" if state.status == FILL_READY else text


class FillStatus(QWidget):
    """One line and, while filling, a progress bar."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel("")
        self.label.setObjectName("fillStatus")
        self.bar = QProgressBar()
        self.bar.setMaximumWidth(120)
        self.bar.setMaximumHeight(12)
        self.bar.setTextVisible(False)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        self.show_state(None)

    def show_state(self, state: FillState | None) -> None:
        """The active document's fill; None: no document."""
        self.label.setText(fill_text(state) if state else "")
        self.label.setToolTip(
            state.detail if state and state.detail else OFF_TIP if state and state.status == FILL_OFF else ""
        )
        filling = state is not None and state.status in (FILL_FILLING, FILL_READING)
        self.bar.setVisible(filling)
        if filling:
            self.bar.setRange(0, max(state.total, 1))
            self.bar.setValue(min(state.done, state.total))

    @property
    def text(self) -> str:
        return self.label.text()
