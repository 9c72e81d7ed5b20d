"""A run on the panes: each pane begun for its request, the events routed, the answer kept in the thread."""

from __future__ import annotations

from pathlib import Path

from desktop.model.doc_threads import ANSWERED, DocumentThread, Exchange
from desktop.model.doc_threads import CANCELLED as EXCHANGE_CANCELLED
from desktop.model.doc_threads import FAILED as EXCHANGE_FAILED
from desktop.model.prediction import Prediction
from desktop.model.run_progress import stage_predictions
from desktop.sessions.job_session import CANCELLED, FAILED, FINISHED
from desktop.sessions.run_session import RunRequest
from desktop.window.layout import TAB_ANSWERS
from desktop.window.parts import WindowHooks, WindowSessions, WindowViews
from engine.api import Document, Notice, RunFinished, SelectionMade

OUTCOME_STATES = {FINISHED: ANSWERED, CANCELLED: EXCHANGE_CANCELLED, FAILED: EXCHANGE_FAILED}


class RunFlow:
    def __init__(self, views: WindowViews, sessions: WindowSessions, hooks: WindowHooks) -> None:
        self._views, self._hooks = views, hooks
        self._runs, self._threads = sessions.runs, sessions.threads
        self._asking: tuple[DocumentThread, Exchange] | None = None  # the question the run answers
        self._begun_runs: set[str] = set()  # the panes the current run has started
        self._pane_context: dict[str, tuple[Document, str]] = {}
        self._prediction: Prediction | None = None  # the cost model's, for the current run's ETAs
        self._runs.started.connect(self._on_started)
        self._runs.event.connect(self._on_event)
        self._runs.ended.connect(self._on_ended)
        views.comparison.compareAnswersRequested.connect(self._show_answer_diff)
        views.comparison.toggleAnswerRequested.connect(self._toggle_answer)

    def mark_cancelling(self) -> None:
        runs = self._runs
        if runs.is_active:
            for run in runs.request.runs:
                self._views.panes[run].mark_cancelling()

    def _on_started(self, request: RunRequest) -> None:
        views = self._views
        views.banner.dismiss()
        self._begun_runs = set()
        # Taken once, at the start: mode "auto" begins its pane at the run's first event.
        self._prediction = self._hooks.predict(request.settings)
        for index, run in enumerate(request.runs):
            self._begin_pane(request, run, waiting_for="full prefill" if index > 0 else None)
        thread = self._threads.active
        self._asking = (thread, thread.ask(request.question, request.mode)) if thread is not None else None
        views.thread_view.refresh()
        views.compare_caption.hide()
        self.update_comparison()
        self._hooks.apply_enablement()

    def _begin_pane(self, request: RunRequest, run: str, waiting_for: str | None = None) -> None:
        """Clear `run`'s pane for this request: at the start, or (mode "auto") at the run's first event."""
        self._begun_runs.add(run)
        self._views.panes[run].begin(
            request.settings.max_new_tokens,
            waiting_for=waiting_for,
            question=request.question,
            document_name=Path(request.document.path).name,
            stage_seconds=self._stage_seconds(run),
        )
        self._pane_context[run] = (request.document, request.question)
        if run == "spec":
            self._views.kept_view.clear_selection()  # the old selection does not describe this run

    def _stage_seconds(self, run: str) -> dict[str, float] | None:
        """The cost model's time for `run`'s long stages, so its pane can say about how long is left."""
        prediction = self._prediction
        if prediction is None:
            return None
        return stage_predictions(run, prediction.estimate, bypassed=bool(prediction.bypass_reason))

    def _on_event(self, event: object) -> None:
        views = self._views
        run = getattr(event, "run", None)
        if isinstance(event, Notice) and run is None:
            views.banner.show_info(event.message)
            return
        pane = views.panes.get(run)
        if pane is not None and run not in self._begun_runs:
            self._begin_pane(self._runs.request, run)
        if pane is not None:
            pane.apply(event)
        if isinstance(event, SelectionMade):
            views.kept_view.set_selection(self._runs.request.document, event.selection)
        elif isinstance(event, RunFinished):
            self._record_answer(event.result)
            self.update_comparison()

    def _record_answer(self, result) -> None:
        """Into the thread it was asked in (still that one, even if another document opened since)."""
        if self._asking is None:
            return
        thread, exchange = self._asking
        exchange.answers.append(result)
        views = self._views
        if thread is self._threads.active:
            views.thread_view.refresh()
            views.compare_caption.setText(exchange.caption)
            views.compare_caption.setVisible(bool(exchange.caption))

    def _on_ended(self, outcome: str, message: str) -> None:
        views = self._views
        for run in self._begun_runs:
            if outcome == CANCELLED:
                views.panes[run].mark_cancelled()
            elif outcome == FAILED:
                views.panes[run].mark_failed(message)
        if outcome == FAILED:
            views.banner.show_error(message)
        elif outcome == CANCELLED:
            views.status_bar.showMessage("Run cancelled", 5000)
        self._end_exchange(outcome, message)
        self._hooks.apply_enablement()
        self._hooks.resume_fill()

    def _end_exchange(self, outcome: str, message: str) -> None:
        if self._asking is None:
            return
        thread, exchange = self._asking
        exchange.state, exchange.message = OUTCOME_STATES[outcome], message
        self._asking = None
        if thread is self._threads.active:
            self._views.thread_view.refresh()

    def update_comparison(self) -> None:
        """The comparison bar compares two results only when both answered the same question on one document."""
        views = self._views
        baseline_pane, spec_pane = views.panes["baseline"], views.panes["spec"]
        baseline, spec = baseline_pane.result, spec_pane.result
        comparable = (
            baseline is not None
            and spec is not None
            and _same_context(self._pane_context.get("baseline"), self._pane_context.get("spec"))
        )
        views.comparison.show_results(baseline if comparable else None, spec if comparable else None)
        views.answers.set_answers(baseline_pane.answer_text, spec_pane.answer_text)

    def _show_answer_diff(self) -> None:
        self._views.answers.set_mode("diff")
        self._hooks.show_tab(TAB_ANSWERS)

    def _toggle_answer(self) -> None:
        self._views.answers.toggle()
        self._hooks.show_tab(TAB_ANSWERS)


def _same_context(a: tuple[Document, str] | None, b: tuple[Document, str] | None) -> bool:
    return a is not None and b is not None and a[0] is b[0] and a[1] == b[1]
