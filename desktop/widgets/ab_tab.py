"""The "A/B test" tab: a suite to run (or a quick check of the open document), progress, results.

It asks the window to run (runRequested) rather than starting anything itself: the window
adds the run settings, owns the one-run-at-a-time rule and says what is enabled.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from desktop.model.ab_records import AbOutcome, AbRequest, AbRow, CaseFailure
from desktop.model.suite_builder import quick_check_case
from desktop.sessions.job_session import CANCELLED, FAILED, FINISHED
from desktop.widgets.ab_results import AbResultsView
from desktop.widgets.suite_panel import SuitePanel
from desktop.widgets.theme import text_css
from engine.api import (
    DEFAULT_KEEPS,
    AbError,
    AbProgress,
    RunSettings,
    format_count,
    format_duration,
    parse_keeps,
)

QUICK_CHECK_KEEPS = parse_keeps(DEFAULT_KEEPS)  # three keep values
REUSE_CACHE_TEXT = "Reuse document caches (cached TTFTs labelled)"
REUSE_CACHE_TIP = (
    "Ask each document's questions in one session: its follow-up questions are served from the "
    "document's caches, so accuracy is measured many times faster. Their TTFTs are labelled "
    '"cached" and kept out of the mean TTFT and speed-up, which stay over cold runs only.'
)
ERROR_COLOR, OK_STYLE = "#b91c1c", ""


def progress_text(p: AbProgress) -> str:
    eta = "estimating…" if p.eta_s is None else format_duration(p.eta_s)
    return f"case {p.case_number} of {p.n_cases} · {p.label} · ETA {eta}"


class AbTab(QWidget):
    runRequested = Signal(str, object, object)  # title, cases, keeps
    cancelRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.suite = SuitePanel()
        self.suite.casesChanged.connect(self._refresh_buttons)
        self.keeps = QLineEdit(DEFAULT_KEEPS)
        self.keeps.setObjectName("abKeeps")
        self.keeps.setToolTip("Comma-separated fractions of chunks SpecPrefill keeps, each in (0, 1]")
        self.run_button = QPushButton("Run suite")
        self.run_button.setObjectName("abRunButton")
        self.run_button.clicked.connect(self.run_suite)
        self.quick_button = QPushButton(f"Quick check ({', '.join(QUICK_CHECK_KEEPS)})")
        self.quick_button.setObjectName("abQuickButton")
        self.quick_button.clicked.connect(self.quick_check)
        self.reuse_cache_box = QCheckBox(REUSE_CACHE_TEXT)  # off: every run cold, as the CLI's default
        self.reuse_cache_box.setObjectName("abReuseCache")
        self.reuse_cache_box.setToolTip(REUSE_CACHE_TIP)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(12)
        self.progress_label = QLabel("")
        self.progress_label.setObjectName("abProgress")
        self.message = QLabel("")
        self.message.setObjectName("abMessage")
        self.message.setWordWrap(True)
        for label in (self.progress_label, self.message):
            label.setTextFormat(Qt.TextFormat.PlainText)
        self.results = AbResultsView()
        self.results.exported.connect(lambda path: self._say(f"Wrote {path}"))
        self.results.exportFailed.connect(lambda message: self._say(message, error=True))
        self._current: tuple[Path, str] | None = None
        self._failures: list[str] = []  # this suite's failed cases, as messages
        self._can_run, self._running, self._reason = False, False, ""
        self._build_layout()
        self._refresh_buttons()

    def _build_layout(self) -> None:
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Keep values:"))
        controls.addWidget(self.keeps, 1)
        controls.addWidget(self.run_button)
        controls.addWidget(self.quick_button)
        controls.addWidget(self.cancel_button)
        options = QHBoxLayout()
        options.addWidget(self.reuse_cache_box)
        options.addStretch(1)
        progress = QHBoxLayout()
        progress.addWidget(self.progress, 1)
        progress.addWidget(self.progress_label)
        right = QWidget()
        right_column = QVBoxLayout(right)
        right_column.setContentsMargins(0, 0, 0, 0)
        right_column.addLayout(controls)
        right_column.addLayout(options)
        right_column.addLayout(progress)
        right_column.addWidget(self.message)
        right_column.addWidget(self.results, 1)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setObjectName("abSplitter")  # the window remembers its position by this name
        splitter.addWidget(self.suite)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)

    # --- state from the window -----------------------------------------------------------------

    def set_current(self, document: Path | None, question: str) -> None:
        """The open document and question: what "Add current" and the quick check use."""
        self._current = (document, question.strip()) if document is not None and question.strip() else None
        self.suite.set_current(document, question)
        self._refresh_buttons()

    def set_state(self, *, can_run: bool, running: bool, reason: str = "") -> None:
        """can_run: the engine is free for a suite; running: this tab's suite is the one running."""
        self._can_run, self._running, self._reason = can_run, running, reason
        self._refresh_buttons()

    # --- requests ------------------------------------------------------------------------------

    @property
    def reuse_cache(self) -> bool:
        """Whether the next suite reuses each document's caches (the window puts it in the AbRequest)."""
        return self.reuse_cache_box.isChecked()

    def request(self, title: str, cases: list, keeps: list[str], settings: RunSettings) -> AbRequest:
        """The AbRequest for a run this tab asked for, with the window's run settings and this tab's options."""
        return AbRequest(title, list(cases), list(keeps), settings, reuse_cache=self.reuse_cache)

    def run_suite(self) -> None:
        keeps = self._parse_keeps()
        if keeps is not None and self.suite.cases:
            self.runRequested.emit(self.suite.name, self.suite.cases, keeps)

    def quick_check(self) -> None:
        if self._current is None:
            return
        document, question = self._current
        self.runRequested.emit(
            f"quick check of {document.name}", [quick_check_case(document, question)], list(QUICK_CHECK_KEEPS)
        )

    def _parse_keeps(self) -> list[str] | None:
        try:
            return parse_keeps(self.keeps.text())
        except AbError as e:
            self._say(f"Keep values: {e}", error=True)
            return None

    # --- the session's progress ---------------------------------------------------------------

    def begin(self, request: AbRequest) -> None:
        self._failures = []
        self._say("")
        self.progress.setRange(0, len(request.cases) * (1 + len(request.keeps)))
        self.progress.setValue(0)
        self.progress_label.setText("starting…")
        self.results.begin(request.title, [case.id for case in request.cases], request.keeps)

    def show_progress(self, p: AbProgress) -> None:
        self.progress.setValue(p.runs_done)
        self.progress_label.setText(progress_text(p))

    def add_row(self, row: AbRow | CaseFailure) -> None:
        if isinstance(row, CaseFailure):
            self._show_failure(row)
            return
        self.progress.setValue(self.progress.value() + 1)
        self.results.add_row(row)

    def _show_failure(self, failure: CaseFailure) -> None:
        """The suite goes on: the case's row shows the error, and the message lists every failed case."""
        self._failures.append(failure.message)
        self.results.show_failure(failure)
        self._say("\n".join(self._failures), error=True)

    def end(self, kind: str, message: str, request: AbRequest, outcome: AbOutcome | None) -> None:
        if kind == FINISHED and outcome is not None:
            self.progress.setValue(self.progress.maximum())
            failed = f" · {format_count(len(self._failures), 'case')} failed" if self._failures else ""
            self.progress_label.setText(f"done{failed}")
            self.results.show_outcome(request.title, outcome)
        elif kind == CANCELLED:
            self.progress_label.setText("cancelled")
            self.results.show_stopped(request.title, "cancelled")
        elif kind == FAILED:
            self.progress_label.setText("failed")
            self.results.show_stopped(request.title, "failed")
            self._say(message, error=True)

    # --- display -------------------------------------------------------------------------------

    def _say(self, text: str, *, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(text_css(self.message, ERROR_COLOR) if error else OK_STYLE)

    def _refresh_buttons(self) -> None:
        self.run_button.setEnabled(self._can_run and bool(self.suite.cases))
        self.quick_button.setEnabled(self._can_run and self._current is not None)
        self.cancel_button.setEnabled(self._running)
        why_not = "" if self._can_run else self._reason  # say why a button is greyed out
        self.run_button.setToolTip(
            why_not or "Run every case: the baseline, then SpecPrefill at each keep value"
        )
        self.quick_button.setToolTip(why_not or "Run the open document's question at three keep values")
