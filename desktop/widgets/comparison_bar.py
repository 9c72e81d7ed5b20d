"""Under the panes: the speed-up (baseline TTFT / SpecPrefill TTFT) and how much the answers agree.

The agreement (ROUGE-L over two answers) is computed on a worker and shown when it arrives;
a result that arrives after newer answers were shown is dropped.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from desktop.sessions.worker import Worker, make_pool
from engine.api import RunResult, answer_agreement, format_seconds

NOT_YET = "—"
COMPUTING = "…"


def speedup(baseline: RunResult, spec: RunResult) -> float | None:
    return baseline.ttft_s / spec.ttft_s if spec.ttft_s > 0 else None


class ComparisonBar(QWidget):
    compareAnswersRequested = Signal()
    toggleAnswerRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.speedup = QLabel(f"Speed-up: {NOT_YET}")
        self.speedup.setObjectName("speedup")
        self.speedup.setStyleSheet("font-size: 16px; font-weight: bold;")
        self.agreement = QLabel(f"Answer agreement: {NOT_YET}")
        self.agreement.setObjectName("agreement")
        self.agreement.setToolTip(
            "ROUGE-L F1 between the two answers: 100% means the same words in the same order."
        )
        self.compare_button = QPushButton("Compare answers")
        self.compare_button.clicked.connect(self.compareAnswersRequested)
        self.toggle_button = QPushButton("Toggle answer")
        self.toggle_button.setToolTip(
            "Flip the answer view between the full-prefill and the SpecPrefill answer"
        )
        self.toggle_button.clicked.connect(self.toggleAnswerRequested)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(self.speedup)
        layout.addSpacing(24)
        layout.addWidget(self.agreement)
        layout.addStretch(1)
        layout.addWidget(self.compare_button)
        layout.addWidget(self.toggle_button)
        self._pool = make_pool(1)
        self._agreement_job: Worker | None = None
        self.show_results(None, None)

    @property
    def agreement_pending(self) -> bool:
        """The answers are shown and their agreement is still being computed."""
        return self._agreement_job is not None

    def show_results(self, baseline: RunResult | None, spec: RunResult | None) -> None:
        both = baseline is not None and spec is not None
        self.compare_button.setEnabled(both)
        self.toggle_button.setEnabled(both)
        self._forget_agreement_job()
        if not both:
            self.speedup.setText(f"Speed-up: {NOT_YET}")
            self.agreement.setText(f"Answer agreement: {NOT_YET}")
            return
        self.speedup.setText(_speedup_text(baseline, spec))
        self.agreement.setText(f"Answer agreement: {COMPUTING}")
        self._start_agreement(baseline.answer, spec.answer)

    def _start_agreement(self, baseline_answer: str, spec_answer: str) -> None:
        worker = Worker(lambda ctx: answer_agreement(baseline_answer, spec_answer), name="answer agreement")
        worker.finished.connect(lambda score: self._show_agreement(worker, score))
        worker.failed.connect(lambda _error: self._show_agreement(worker, None))
        self._agreement_job = worker.start(self._pool)

    def _show_agreement(self, worker: Worker, score: float | None) -> None:
        if worker is not self._agreement_job:  # newer answers are shown: this score is not theirs
            return
        self._agreement_job = None
        shown = NOT_YET if score is None else f"{score * 100:.0f}% (ROUGE-L)"
        self.agreement.setText(f"Answer agreement: {shown}")

    def shutdown(self) -> None:
        """The window closes: a score still being computed is dropped, not shown on deleted labels."""
        self._forget_agreement_job()

    def _forget_agreement_job(self) -> None:
        if self._agreement_job is not None:
            self._agreement_job.cancel()
            self._agreement_job = None


def _speedup_text(baseline: RunResult, spec: RunResult) -> str:
    ratio = speedup(baseline, spec)
    if ratio is None:
        return f"Speed-up: {NOT_YET}"
    times = f"TTFT {format_seconds(baseline.ttft_s)} → {format_seconds(spec.ttft_s)}"
    return f"Speed-up: {ratio:.2f}× ({times}{_comparison_notes(baseline, spec)})"


def _comparison_notes(baseline: RunResult, spec: RunResult) -> str:
    """What makes the two TTFTs less than like for like: a bypass, or a full prefill of a cut
    document (it read less than SpecPrefill's draft did)."""
    notes = []
    if spec.bypassed:
        notes.append("SpecPrefill bypassed")
    if baseline.fit == "truncated":
        notes.append("full prefill truncated")
    return "".join(f", {note}" for note in notes)
