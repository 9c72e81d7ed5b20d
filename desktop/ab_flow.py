"""The A/B tab's wiring: what it would test now, and its suite's start and end."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.ab_session import AbRequest
from desktop.job_session import CANCELLED

if TYPE_CHECKING:
    from desktop.main_window import MainWindow


class AbFlow:
    def __init__(self, window: MainWindow) -> None:
        self._window = window
        ab, tab = window.ab, window.ab_tab
        tab.runRequested.connect(window.start_ab)
        tab.cancelRequested.connect(ab.cancel)
        ab.started.connect(self._on_started)
        ab.progress.connect(tab.show_progress)
        ab.row.connect(tab.add_row)
        ab.ended.connect(self._on_ended)

    def refresh_context(self) -> None:
        """The tab's quick check runs the open document's question: tell it which they are."""
        window = self._window
        document = window.documents.document
        window.ab_tab.set_current(document.path if document is not None else None, window.question.question)

    def _on_started(self, request: AbRequest) -> None:
        self._window.ab_tab.begin(request)
        self._window.apply_enablement()

    def _on_ended(self, outcome: str, message: str) -> None:
        window = self._window
        window.ab_tab.end(outcome, message, window.ab.request, window.ab.outcome)
        if outcome == CANCELLED:
            window.statusBar().showMessage("A/B suite cancelled", 5000)
        window.apply_enablement()
        window.resume_fill()
