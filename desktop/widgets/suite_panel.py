"""The A/B suite being edited: open a .jsonl, see its cases, add the open document's question, save.

A suite that fails to parse is reported with engine.eval.suite's own message, which starts
with FILE:LINE, and the cases shown before stay as they were.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.model.suite_builder import ANSWER_SEPARATOR, new_case, save_suite
from desktop.widgets.theme import text_css
from engine.api import Case, SuiteError, format_count, load_suite

SUITE_FILTER = "A/B suites (*.jsonl);;All files (*)"
CASE_COLUMNS = ("id", "kind", "question", "answers", "document")
ERROR_COLOR, OK_STYLE = "#b91c1c", "color: palette(mid);"


def case_cells(case: Case) -> tuple[str, ...]:
    answers = f" {ANSWER_SEPARATOR} ".join(case.answers) if case.answers else "(agreement only)"
    return case.id, case.kind, case.question, answers, case.doc.name


def with_suffix_jsonl(path: str) -> Path:
    chosen = Path(path)
    return chosen if chosen.suffix else chosen.with_suffix(".jsonl")


class SuitePanel(QWidget):
    casesChanged = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._cases: list[Case] = []
        self._path: Path | None = None  # the file the cases came from or were last saved to
        self._current: tuple[Path, str] | None = None  # the open document and question, when both exist
        self.open_button = QPushButton("Open suite…")
        self.open_button.clicked.connect(self._ask_open)
        self.save_button = QPushButton("Save suite as…")
        self.save_button.clicked.connect(self._ask_save)
        self.remove_button = QPushButton("Remove case")
        self.remove_button.clicked.connect(self.remove_selected)
        self.source = QLabel("New suite (not saved)")
        self.message = QLabel("")
        self.message.setObjectName("suiteMessage")
        self.message.setWordWrap(True)
        for label in (self.source, self.message):
            label.setTextFormat(Qt.TextFormat.PlainText)  # paths and parse errors are not markup
        self.table = QTableWidget(0, len(CASE_COLUMNS))
        self.table.setObjectName("suiteCases")
        self.table.setHorizontalHeaderLabels(CASE_COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().hide()
        self.table.itemSelectionChanged.connect(self._refresh_buttons)
        self.case_id = QLineEdit()
        self.case_id.setPlaceholderText("id (optional)")
        self.answers = QLineEdit()
        self.answers.setPlaceholderText(f"expected answers, optional, separated by {ANSWER_SEPARATOR}")
        self.add_button = QPushButton("Add current document + question")
        self.add_button.clicked.connect(self.add_current)
        self._build_layout()
        self._refresh_buttons()

    def _build_layout(self) -> None:
        files = QHBoxLayout()
        files.addWidget(self.open_button)
        files.addWidget(self.save_button)
        files.addStretch(1)
        files.addWidget(self.remove_button)
        adding = QHBoxLayout()
        adding.addWidget(self.case_id)
        adding.addWidget(self.answers, 2)
        adding.addWidget(self.add_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(files)
        layout.addWidget(self.source)
        layout.addWidget(self.message)
        layout.addWidget(self.table, 1)
        layout.addLayout(adding)

    @property
    def cases(self) -> list[Case]:
        return list(self._cases)

    @property
    def name(self) -> str:
        return self._path.name if self._path else "unsaved suite"

    # --- the open document ---------------------------------------------------------------------

    def set_current(self, document: Path | None, question: str) -> None:
        """What "Add current" adds; disabled until a document is open and a question typed."""
        self._current = (document, question) if document is not None and question.strip() else None
        self._refresh_buttons()

    def add_current(self) -> None:
        if self._current is None:
            return
        document, question = self._current
        case = new_case(
            document,
            question,
            case_id=self.case_id.text(),
            answers_text=self.answers.text(),
            existing=self._cases,
        )
        self._set_cases([*self._cases, case])
        self.case_id.clear()
        self.answers.clear()
        self._say(f"Added case {case.id!r}.")

    def remove_selected(self) -> None:
        rows = {index.row() for index in self.table.selectionModel().selectedRows()}
        self._set_cases([case for row, case in enumerate(self._cases) if row not in rows])

    # --- files ---------------------------------------------------------------------------------

    def open_suite(self, path: str | Path) -> bool:
        try:
            cases = load_suite(path)
        except SuiteError as e:
            self._say(f"Could not open the suite: {e}", error=True)
            return False
        self._set_cases(cases)
        self._set_path(Path(path))
        self._say(f"{format_count(len(cases), 'case')} loaded.")
        return True

    def save_suite(self, path: str | Path) -> bool:
        target = Path(path)
        try:
            cases = save_suite(self._cases, target)
        except (SuiteError, OSError) as e:
            self._say(f"Could not save the suite: {e}", error=True)
            return False
        self._set_cases(cases)
        self._set_path(target)
        self._say(f"Saved {format_count(len(cases), 'case')}.")
        return True

    def _ask_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open an A/B suite", self._folder(), SUITE_FILTER)
        if path:
            self.open_suite(path)

    def _ask_save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the A/B suite", self._folder(), SUITE_FILTER)
        if path:
            self.save_suite(with_suffix_jsonl(path))

    def _folder(self) -> str:
        return str(self._path.parent if self._path else Path.home())

    # --- display -------------------------------------------------------------------------------

    def _set_cases(self, cases: list[Case]) -> None:
        self._cases = list(cases)
        self.table.setRowCount(len(cases))
        for row, case in enumerate(cases):
            for column, text in enumerate(case_cells(case)):
                item = QTableWidgetItem(text)
                item.setToolTip(str(case.doc) if column == len(CASE_COLUMNS) - 1 else text)
                self.table.setItem(row, column, item)
        self._refresh_buttons()
        self.casesChanged.emit()

    def _set_path(self, path: Path) -> None:
        self._path = path
        self.source.setText(str(path))

    def _say(self, text: str, *, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(text_css(self.message, ERROR_COLOR) if error else OK_STYLE)

    def _refresh_buttons(self) -> None:
        self.add_button.setEnabled(self._current is not None)
        self.add_button.setToolTip("" if self._current else "Open a document and type a question first")
        self.save_button.setEnabled(bool(self._cases))
        self.remove_button.setEnabled(bool(self.table.selectionModel().selectedRows()))
