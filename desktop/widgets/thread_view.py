"""The current document's thread: each question with its answers, each tagged with how it was
served (engine.api.SERVED_BY_LABELS), its TTFT and, for a document longer than the window, how much
of it the answer saw; and the one "Clear thread and caches" action."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QTextBrowser, QVBoxLayout, QWidget

from desktop.model.doc_threads import ANSWERED, ASKING, CANCELLED, FAILED, DocumentThread, Exchange
from desktop.model.run_fit import with_fit
from engine.api import SERVED_BY_LABELS, RunResult, format_seconds

CLEAR_TEXT = "Clear thread and caches"
CLEAR_TIP = (
    "Forget this document's questions and answers, and drop its caches: the target's full "
    "document, the draft's cache, the background fill and the saved state on disk"
)
EMPTY_TEXT = "No questions yet: ask one above. Follow-ups reuse this document's caches."
RUN_TITLES = {"baseline": "Full prefill", "spec": "SpecPrefill"}
MODE_TITLES = {"auto": "Ask", "baseline": "Full prefill only", "spec": "SpecPrefill only", "both": "Compare"}
STATE_TEXT = {ASKING: "answering…", CANCELLED: "cancelled"}


def served_text(result: RunResult) -> str:
    """ "SpecPrefill with the cached draft · TTFT 0.40 s", then "· truncated: saw 52% of the document"
    for a document longer than the window; the label is the engine's own wording."""
    label = SERVED_BY_LABELS.get(result.served_by, result.served_by or "one-shot run")
    return with_fit(f"{label} · TTFT {format_seconds(result.ttft_s)}", result)


def exchange_html(number: int, exchange: Exchange) -> str:
    parts = [
        f"<p><b>Q{number}: {escape(exchange.question)}</b> "
        f"<span style='color: gray'>({MODE_TITLES.get(exchange.mode, exchange.mode)})</span></p>"
    ]
    if exchange.caption:
        parts.append(f"<p><i>{escape(exchange.caption)}</i></p>")
    for answer in exchange.answers:
        title = RUN_TITLES.get(answer.run, answer.run)
        parts.append(
            f"<p>&nbsp;&nbsp;<b>{title}</b> — {escape(served_text(answer))}<br>"
            f"&nbsp;&nbsp;{escape(answer.answer)}</p>"
        )
    if exchange.state == FAILED:
        parts.append(f"<p>&nbsp;&nbsp;<i>failed: {escape(exchange.message)}</i></p>")
    elif exchange.state != ANSWERED:
        parts.append(f"<p>&nbsp;&nbsp;<i>{STATE_TEXT[exchange.state]}</i></p>")
    return "".join(parts)


class ThreadView(QWidget):
    clearRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._thread: DocumentThread | None = None
        self.title = QLabel("No document")
        self.title.setStyleSheet("font-weight: bold;")
        self.clear_button = QPushButton(CLEAR_TEXT)
        self.clear_button.setToolTip(CLEAR_TIP)
        self.clear_button.clicked.connect(self.clearRequested)
        self.browser = QTextBrowser()
        self.browser.setOpenLinks(False)  # answers are text to read, not links to follow
        self.browser.setPlaceholderText(EMPTY_TEXT)
        header = QHBoxLayout()
        header.addWidget(self.title, 1)
        header.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.addLayout(header)
        layout.addWidget(self.browser, 1)
        self.set_clear_enabled(False)

    @property
    def thread(self) -> DocumentThread | None:
        return self._thread

    def show_thread(self, thread: DocumentThread | None) -> None:
        self._thread = thread
        self.refresh()

    def refresh(self) -> None:
        """Redraw the thread (after a question, an answer or its end), keeping the reader at the end."""
        thread = self._thread
        self.title.setText(f"Thread: {thread.name}" if thread else "No document")
        exchanges = thread.exchanges if thread else []
        self.browser.setHtml("".join(exchange_html(n, e) for n, e in enumerate(exchanges, 1)))
        bar = self.browser.verticalScrollBar()
        bar.setValue(bar.maximum())

    def set_clear_enabled(self, enabled: bool) -> None:
        self.clear_button.setEnabled(enabled)

    def text(self) -> str:
        return self.browser.toPlainText()
