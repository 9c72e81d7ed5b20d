"""A run on the panes: each pane begun for its request, the events routed, the answer kept in the thread."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from desktop.doc_threads import ANSWERED, DocumentThread, Exchange
from desktop.doc_threads import CANCELLED as EXCHANGE_CANCELLED
from desktop.doc_threads import FAILED as EXCHANGE_FAILED
from desktop.engine_host import Prediction
from desktop.job_session import CANCELLED, FAILED, FINISHED
from desktop.run_pane import stage_predictions
from desktop.run_session import RunRequest
from desktop.window_layout import TAB_ANSWERS
from engine.api import Document, Notice, RunFinished, SelectionMade

if TYPE_CHECKING:
    from desktop.main_window import MainWindow

OUTCOME_STATES = {FINISHED: ANSWERED, CANCELLED: EXCHANGE_CANCELLED, FAILED: EXCHANGE_FAILED}


class RunFlow:
    def __init__(self, window: MainWindow) -> None:
        self._window = window
        self._asking: tuple[DocumentThread, Exchange] | None = None  # the question the run answers
        self._begun_runs: set[str] = set()  # the panes the current run has started
        self._pane_context: dict[str, tuple[Document, str]] = {}
        self._prediction: Prediction | None = None  # the cost model's, for the current run's ETAs
        window.runs.started.connect(self._on_started)
        window.runs.event.connect(self._on_event)
        window.runs.ended.connect(self._on_ended)
        window.comparison.compareAnswersRequested.connect(self._show_answer_diff)
        window.comparison.toggleAnswerRequested.connect(self._toggle_answer)

    def mark_cancelling(self) -> None:
        window = self._window
        if window.runs.is_active:
            for run in window.runs.request.runs:
                window.panes[run].mark_cancelling()

    def _on_started(self, request: RunRequest) -> None:
        window = self._window
        window.banner.dismiss()
        self._begun_runs = set()
        # Taken once, at the start: mode "auto" begins its pane at the run's first event.
        self._prediction = window.predict(request.settings)
        for index, run in enumerate(request.runs):
            self._begin_pane(request, run, waiting_for="full prefill" if index > 0 else None)
        thread = window.thread
        self._asking = (thread, thread.ask(request.question, request.mode)) if thread is not None else None
        window.thread_view.refresh()
        window.compare_caption.hide()
        self.update_comparison()
        window.apply_enablement()

    def _begin_pane(self, request: RunRequest, run: str, waiting_for: str | None = None) -> None:
        """Clear `run`'s pane for this request: at the start, or (mode "auto") at the run's first event."""
        window = self._window
        self._begun_runs.add(run)
        window.panes[run].begin(
            request.settings.max_new_tokens,
            waiting_for=waiting_for,
            question=request.question,
            document_name=Path(request.document.path).name,
            stage_seconds=self._stage_seconds(run),
        )
        self._pane_context[run] = (request.document, request.question)
        if run == "spec":
            window.kept_view.clear_selection()  # the old selection does not describe this run

    def _stage_seconds(self, run: str) -> dict[str, float] | None:
        """The cost model's time for `run`'s long stages, so its pane can say about how long is left."""
        prediction = self._prediction
        if prediction is None:
            return None
        return stage_predictions(run, prediction.estimate, bypassed=bool(prediction.bypass_reason))

    def _on_event(self, event: object) -> None:
        window = self._window
        run = getattr(event, "run", None)
        if isinstance(event, Notice) and run is None:
            window.banner.show_info(event.message)
            return
        pane = window.panes.get(run)
        if pane is not None and run not in self._begun_runs:
            self._begin_pane(window.runs.request, run)
        if pane is not None:
            pane.apply(event)
        if isinstance(event, SelectionMade):
            window.kept_view.set_selection(window.runs.request.document, event.selection)
        elif isinstance(event, RunFinished):
            self._record_answer(event.result)
            self.update_comparison()

    def _record_answer(self, result) -> None:
        """Into the thread it was asked in (still that one, even if another document opened since)."""
        if self._asking is None:
            return
        thread, exchange = self._asking
        exchange.answers.append(result)
        window = self._window
        if thread is window.thread:
            window.thread_view.refresh()
            window.compare_caption.setText(exchange.caption)
            window.compare_caption.setVisible(bool(exchange.caption))

    def _on_ended(self, outcome: str, message: str) -> None:
        window = self._window
        for run in self._begun_runs:
            if outcome == CANCELLED:
                window.panes[run].mark_cancelled()
            elif outcome == FAILED:
                window.panes[run].mark_failed(message)
        if outcome == FAILED:
            window.banner.show_error(message)
        elif outcome == CANCELLED:
            window.statusBar().showMessage("Run cancelled", 5000)
        self._end_exchange(outcome, message)
        window.apply_enablement()
        window.resume_fill()

    def _end_exchange(self, outcome: str, message: str) -> None:
        if self._asking is None:
            return
        thread, exchange = self._asking
        exchange.state, exchange.message = OUTCOME_STATES[outcome], message
        self._asking = None
        if thread is self._window.thread:
            self._window.thread_view.refresh()

    def update_comparison(self) -> None:
        """The comparison bar compares two results only when both answered the same question on one document."""
        window = self._window
        baseline, spec = window.baseline_pane.result, window.spec_pane.result
        comparable = (
            baseline is not None
            and spec is not None
            and _same_context(self._pane_context.get("baseline"), self._pane_context.get("spec"))
        )
        window.comparison.show_results(baseline if comparable else None, spec if comparable else None)
        window.answers.set_answers(window.baseline_pane.answer_text, window.spec_pane.answer_text)

    def _show_answer_diff(self) -> None:
        self._window.answers.set_mode("diff")
        self._window.show_tab(TAB_ANSWERS)

    def _toggle_answer(self) -> None:
        self._window.answers.toggle()
        self._window.show_tab(TAB_ANSWERS)


def _same_context(a: tuple[Document, str] | None, b: tuple[Document, str] | None) -> bool:
    return a is not None and b is not None and a[0] is b[0] and a[1] == b[1]
