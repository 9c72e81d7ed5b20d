"""An A/B suite's results: per-case table (filled run by run), summary, the report's two plots, export.

Figures read as in the HTML report and the CLI: the same formatting (engine.core.formatting),
the same plots (drawn on the engine thread by desktop.sessions.ab_session), the same CSV writer.
A case that failed shows "error" in the runs it did not finish, with the reason on hover.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.model.ab_records import AbOutcome, AbRow, CaseFailure
from engine.api import (
    MISSING,
    GroupSummary,
    RunRecord,
    RunSummary,
    Summary,
    format_accuracy,
    format_count,
    format_percent,
    format_ratio,
    format_seconds,
    run_label,
    run_notes,
    write_csv,
    write_text_atomic,
)

BASELINE_COLUMNS = ("answer", "correct", "TTFT")
KEEP_COLUMNS = ("correct", "agreement", "TTFT")
SUMMARY_COLUMNS = ("accuracy", "agreement", "mean TTFT", "speed-up", "bypassed")
CACHED_SUMMARY_COLUMNS = ("cached runs", "cached mean TTFT")  # suites that reused document caches
ANSWER_COLUMN_WIDTH = 260
NOT_RUN, FAILED_CELL = "not run yet", "error"


# --- cell texts -------------------------------------------------------------------------------


def correct_mark(correct: bool | None) -> str:
    if correct is None:
        return MISSING  # the case has no expected answers
    return "✓" if correct else "✗"


def ttft_text(record: RunRecord) -> str:
    """The TTFT with what sets it apart: served from a cache (never comparable with cold ones), a
    document cut or selected to fit the window, bypassed."""
    notes = run_notes(record.result)
    return format_seconds(record.result.ttft_s) + (f" ({', '.join(notes)})" if notes else "")


def run_cells(record: RunRecord, keep: str | None) -> tuple[str, ...]:
    if keep is None:
        return record.result.answer, correct_mark(record.correct), ttft_text(record)
    return correct_mark(record.correct), format_percent(record.agreement), ttft_text(record)


def summary_cells(s: RunSummary, with_cached: bool = False) -> tuple[str, ...]:
    cells = (
        format_accuracy(s.accuracy, s.n_scored),
        format_percent(s.agreement),
        format_seconds(s.mean_ttft_s),
        format_ratio(s.speedup),
        _count(s.n_bypassed),
    )
    return (*cells, _count(s.n_cached), format_seconds(s.cached_mean_ttft_s)) if with_cached else cells


def _count(n: int | None) -> str:
    return MISSING if n is None else str(n)


def has_cached_runs(summary: Summary) -> bool:
    """True for a suite run in document sessions (its summaries count cached runs, even none)."""
    return any(s.n_cached is not None for _, s in summary.overall.runs())


def failures_text(group: GroupSummary) -> str:
    return f" ({format_count(group.n_errors, 'case')} failed)" if group.n_errors else ""


def column_headers(keeps: list[str]) -> list[str]:
    return [
        "case",
        *(f"baseline {c}" for c in BASELINE_COLUMNS),
        *(f"keep {keep} {c}" for keep in keeps for c in KEEP_COLUMNS),
    ]


# --- widgets ----------------------------------------------------------------------------------


def _read_only_table() -> QTableWidget:
    table = QTableWidget()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.verticalHeader().hide()
    return table


def _set_cell(table: QTableWidget, row: int, column: int, text: str, tooltip: str = "") -> None:
    item = QTableWidgetItem(text)
    item.setToolTip(tooltip or text)
    table.setItem(row, column, item)


def text_at(table: QTableWidget, row: int, header: str) -> str:
    """The text under the column titled `header` (tests and screenshots read cells this way)."""
    for column in range(table.columnCount()):
        if table.horizontalHeaderItem(column).text() == header:
            item = table.item(row, column)
            return item.text() if item is not None else ""
    raise KeyError(header)


class CaseResultsTable(QWidget):
    """One row per case: the baseline's answer, correctness and TTFT, then the same per keep."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = _read_only_table()
        self.table.setObjectName("abCaseTable")
        self._keeps: list[str] = []
        self._row_of: dict[str, int] = {}
        self._finished: dict[str, set[str | None]] = {}  # per case, the runs (keep; None: baseline) shown
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table)

    def begin(self, case_ids: list[str], keeps: list[str]) -> None:
        """Lay out an empty row per case; runs fill them in as they finish."""
        self._keeps = list(keeps)
        self._row_of = {case_id: row for row, case_id in enumerate(case_ids)}
        self._finished = {case_id: set() for case_id in case_ids}
        headers = column_headers(self._keeps)
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setRowCount(len(case_ids))
        self.table.setHorizontalHeaderLabels(headers)
        for case_id, row in self._row_of.items():
            _set_cell(self.table, row, 0, case_id)
            for column in range(1, len(headers)):
                _set_cell(self.table, row, column, MISSING, NOT_RUN)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)  # answers are long: hover for them
        self.table.setColumnWidth(1, ANSWER_COLUMN_WIDTH)

    def add_row(self, row: AbRow) -> None:
        answer = f"{run_label(row.keep)}: {row.record.result.answer}"  # every cell of a run shows its answer on hover
        self._fill(row.case_id, row.keep, run_cells(row.record, row.keep), answer)
        self._finished[row.case_id].add(row.keep)

    def show_failure(self, failure: CaseFailure) -> None:
        """The runs the failed case did not finish read "error", with the reason on hover."""
        for keep in [None, *self._keeps]:
            if keep not in self._finished[failure.case_id]:
                width = len(BASELINE_COLUMNS) if keep is None else len(KEEP_COLUMNS)
                self._fill(failure.case_id, keep, (FAILED_CELL,) * width, failure.message)

    def _fill(self, case_id: str, keep: str | None, texts: tuple[str, ...], tooltip: str) -> None:
        first = 1 if keep is None else 1 + len(BASELINE_COLUMNS) + len(KEEP_COLUMNS) * self._keeps.index(keep)
        for offset, text in enumerate(texts):
            _set_cell(self.table, self._row_of[case_id], first + offset, text, tooltip)

    def text(self, case_id: str, header: str) -> str:
        return text_at(self.table, self._row_of[case_id], header)


class SummaryTable(QWidget):
    """Accuracy, agreement, mean TTFT, speed-up and bypass count for the baseline and each keep."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = _read_only_table()
        self.table.setObjectName("abSummaryTable")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table)

    def clear(self) -> None:
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)

    def show_summary(self, summary: Summary) -> None:
        rows = [(run_label(keep), s) for keep, s in summary.overall.runs()]
        with_cached = has_cached_runs(
            summary
        )  # mean TTFT is then over cold runs only: cached ones stand apart
        headers = ["run", *SUMMARY_COLUMNS, *(CACHED_SUMMARY_COLUMNS if with_cached else ())]
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setRowCount(len(rows))
        self.table.setHorizontalHeaderLabels(headers)
        for line, (label, s) in enumerate(rows):
            for column, text in enumerate((label, *summary_cells(s, with_cached))):
                _set_cell(self.table, line, column, text)

    def text(self, label: str, header: str) -> str:
        for row in range(self.table.rowCount()):
            if self.table.item(row, 0).text() == label:
                return text_at(self.table, row, header)
        raise KeyError(label)


class PlotsView(QWidget):
    """The report's two plots side by side, scaled down to the room the tab has."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.quality = QLabel("No results yet.")
        self.quality.setObjectName("qualityPlot")
        self.ttft = QLabel("")
        self.ttft.setObjectName("ttftPlot")
        self._pngs: dict[QLabel, QPixmap] = {}
        row = QHBoxLayout(self)
        for label in (self.quality, self.ttft):
            label.setAlignment(Qt.AlignmentFlag.AlignCenter)
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)  # let them shrink
            row.addWidget(label, 1)

    def clear(self) -> None:
        self._pngs = {}
        self.quality.clear()
        self.quality.setText("No results yet.")
        self.ttft.clear()

    def show_plots(self, quality_png: bytes, ttft_png: bytes) -> None:
        self._pngs = {}
        for label, png in ((self.quality, quality_png), (self.ttft, ttft_png)):
            pixmap = QPixmap()
            pixmap.loadFromData(png, "PNG")
            self._pngs[label] = pixmap
        self._fit()

    def plot(self, label: QLabel) -> QPixmap:
        """The full-size plot behind `label` (what was drawn, before any scaling)."""
        return self._pngs[label]

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        for label, pixmap in self._pngs.items():
            size = label.size().boundedTo(pixmap.size())  # never blow a plot up past its drawn size
            label.setPixmap(
                pixmap.scaled(
                    size, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
                )
            )


class AbResultsView(QWidget):
    """What the last suite produced, and the buttons that save it."""

    exported = Signal(str)  # the path written
    exportFailed = Signal(str)  # one-line message

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Results: none yet")
        self.title.setStyleSheet("font-weight: bold;")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.cases = CaseResultsTable()
        self.summary = SummaryTable()
        self.plots = PlotsView()
        self.views = QTabWidget()
        self.views.addTab(self.cases, "Cases")
        self.views.addTab(self.summary, "Summary")
        self.views.addTab(self.plots, "Plots")
        self.export_html_button = QPushButton("Export HTML…")
        self.export_html_button.clicked.connect(self._ask_html_path)
        self.export_csv_button = QPushButton("Export CSV…")
        self.export_csv_button.clicked.connect(self._ask_csv_path)
        self._outcome: AbOutcome | None = None
        self._build_layout()
        self._enable_export()

    def _build_layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.export_html_button)
        top.addWidget(self.export_csv_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.views, 1)

    def begin(self, title: str, case_ids: list[str], keeps: list[str]) -> None:
        self._outcome = None
        self.title.setText(f"Results: {title} (running)")
        self.cases.begin(case_ids, keeps)
        self.summary.clear()
        self.plots.clear()
        self.views.setCurrentWidget(self.cases)
        self._enable_export()

    def add_row(self, row: AbRow) -> None:
        self.cases.add_row(row)

    def show_failure(self, failure: CaseFailure) -> None:
        self.cases.show_failure(failure)

    def show_outcome(self, title: str, outcome: AbOutcome) -> None:
        self._outcome = outcome
        self.title.setText(f"Results: {title}{failures_text(outcome.report.summary.overall)}")
        self.summary.show_summary(outcome.report.summary)
        self.plots.show_plots(outcome.quality_png, outcome.ttft_png)
        self._enable_export()

    def show_stopped(self, title: str, why: str) -> None:
        self.title.setText(f"Results: {title} ({why}; the finished runs are shown)")

    def export_html(self, path: str | Path) -> None:
        # The page was rendered with the plots on the engine thread; writing it is all that is left.
        write_text_atomic(path, self._outcome.html)
        self.exported.emit(str(path))

    def export_csv(self, path: str | Path) -> None:
        write_csv(self._outcome.report, path)
        self.exported.emit(str(path))

    def _ask_html_path(self) -> None:
        self._ask_path("Export the A/B report", "ab-report.html", "HTML (*.html)", self.export_html)

    def _ask_csv_path(self) -> None:
        self._ask_path("Export the A/B runs as CSV", "ab-runs.csv", "CSV (*.csv)", self.export_csv)

    def _ask_path(self, caption: str, name: str, filter_: str, write) -> None:
        path, _ = QFileDialog.getSaveFileName(self, caption, str(Path.home() / name), filter_)
        if not path:
            return
        try:
            write(path)
        except OSError as e:
            self.exportFailed.emit(f"Could not write {path}: {e.strerror or e}")

    def _enable_export(self) -> None:
        for button in (self.export_html_button, self.export_csv_button):
            button.setEnabled(self._outcome is not None)
