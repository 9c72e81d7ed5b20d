"""The A/B tab's wiring: what it would test now, and its suite's start and end."""

from __future__ import annotations

from desktop.model.ab_records import AbRequest
from desktop.sessions.job_session import CANCELLED
from desktop.window.parts import WindowHooks, WindowSessions, WindowViews


class AbFlow:
    def __init__(self, views: WindowViews, sessions: WindowSessions, hooks: WindowHooks) -> None:
        self._views, self._sessions, self._hooks = views, sessions, hooks
        ab, tab = sessions.ab, views.ab_tab
        tab.cancelRequested.connect(ab.cancel)
        ab.started.connect(self._on_started)
        ab.progress.connect(tab.show_progress)
        ab.row.connect(tab.add_row)
        ab.ended.connect(self._on_ended)

    def refresh_context(self) -> None:
        """The tab's quick check runs the open document's question: tell it which they are."""
        document = self._sessions.documents.document
        path = document.path if document is not None else None
        self._views.ab_tab.set_current(path, self._views.question.question)

    def _on_started(self, request: AbRequest) -> None:
        self._views.ab_tab.begin(request)
        self._hooks.apply_enablement()

    def _on_ended(self, outcome: str, message: str) -> None:
        ab = self._sessions.ab
        self._views.ab_tab.end(outcome, message, ab.request, ab.outcome)
        if outcome == CANCELLED:
            self._views.status_bar.showMessage("A/B suite cancelled", 5000)
        self._hooks.apply_enablement()
        self._hooks.resume_fill()
