"""Settings ▸ Remote workers: the llama.cpp RPC workers that take a share of the target's layers.

The panel edits ModelSettings.rpc as a list of endpoints: Add checks an entry with the
engine's parse_endpoint, Remove drops the selected one, and Test connection asks every
listed worker what memory it lends. That question blocks for up to ~10 s per worker, so it
runs on a pool thread and the answers arrive one by one as Worker events.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

from PySide6.QtCore import Qt, QThreadPool, Slot
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.sessions.worker import Worker
from desktop.widgets.theme import text_css
from engine.api import (
    DEFAULT_WORKER_PORT,
    Endpoint,
    SettingsError,
    WorkerMemory,
    format_bytes,
    join_endpoints,
    parse_endpoint,
    parse_endpoints,
    query_memory,
    with_default_port,
    worker_start_command,
)

TESTING = "testing…"
ERROR_COLOR = "#c62828"
LIST_ROWS = 4  # the list's height in rows: a few workers is the usual case
SECURITY_NOTE = (
    "The RPC protocol has no authentication: list only workers on a network you trust. "
    f"Start a worker on the other machine with <code>{html.escape(worker_start_command())}</code>: "
    "a worker binds only 127.0.0.1 unless --host names its address."
)


def memory_text(memory: WorkerMemory) -> str:
    """What one worker answered: "lends 18.2 GB of 23.4 GB", or why it did not answer."""
    if memory.error:
        return memory.error
    return f"lends {format_bytes(memory.free_bytes)} of {format_bytes(memory.total_bytes)}"


def query_all(endpoints: tuple[Endpoint, ...]) -> Iterator[WorkerMemory]:
    """Each worker's memory as soon as it answers: asked side by side, so one slow worker does not hold up the rest."""
    with ThreadPoolExecutor(max_workers=len(endpoints)) as pool:
        for answer in as_completed([pool.submit(query_memory, endpoint) for endpoint in endpoints]):
            yield answer.result()


class _EntryLine(QLineEdit):
    """The endpoint entry: Enter adds the worker, and must not also press the dialog's OK."""

    def keyPressEvent(self, event: QKeyEvent) -> None:
        super().keyPressEvent(event)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            event.accept()  # QLineEdit ignores Enter, which would let it reach the dialog


class RemoteWorkersPanel(QGroupBox):
    """The list of RPC workers, with Add, Remove and Test connection; its value is ModelSettings.rpc."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Remote workers", parent)
        self._endpoints: list[Endpoint] = []
        self._results: dict[Endpoint, str] = {}  # the last test's answer per worker
        self._test: Worker | None = None
        self._build()
        self._update_buttons()

    def _build(self) -> None:
        self.workers = QListWidget()
        self.workers.setMaximumHeight(self.fontMetrics().lineSpacing() * (LIST_ROWS + 1))
        self.workers.currentRowChanged.connect(self._update_buttons)
        self.entry = _EntryLine()
        self.entry.setPlaceholderText(f"HOST:PORT, e.g. 127.0.0.1:{DEFAULT_WORKER_PORT}")
        self.entry.returnPressed.connect(self.add_entry)
        self.entry.textEdited.connect(lambda _: self._show_error(""))
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self.add_entry)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self.remove_selected)
        self.test_button = QPushButton("Test connection")
        self.test_button.clicked.connect(self.test_connections)
        self.error = QLabel("")
        self.error.setObjectName("remoteWorkersError")
        self.error.setWordWrap(True)
        self.error.hide()
        note = QLabel(SECURITY_NOTE)
        note.setWordWrap(True)
        note.setTextFormat(Qt.TextFormat.RichText)

        entry_row = QHBoxLayout()
        entry_row.addWidget(self.entry, 1)
        entry_row.addWidget(self.add_button)
        list_buttons = QVBoxLayout()
        list_buttons.addWidget(self.remove_button)
        list_buttons.addWidget(self.test_button)
        list_buttons.addStretch(1)
        list_row = QHBoxLayout()
        list_row.addWidget(self.workers, 1)
        list_row.addLayout(list_buttons)
        layout = QVBoxLayout(self)
        layout.addLayout(list_row)
        layout.addLayout(entry_row)
        layout.addWidget(self.error)
        layout.addWidget(note)

    # --- the value: ModelSettings.rpc ---------------------------------------------------------------

    def endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(self._endpoints)

    def field_value(self) -> str:
        return join_endpoints(self._endpoints)

    def set_field_value(self, rpc: str) -> None:
        self._endpoints = list(parse_endpoints(rpc))
        self._results.clear()
        self._show_error("")
        self._render()

    # --- editing ------------------------------------------------------------------------------------------

    @Slot()
    def add_entry(self) -> bool:
        """Add the typed worker; a malformed or repeated one is refused with its reason below the entry."""
        try:
            endpoint = parse_endpoint(with_default_port(self.entry.text()))
        except SettingsError as exc:
            self._show_error(str(exc))
            return False
        if endpoint in self._endpoints:
            self._show_error(f"RPC worker {endpoint} is already listed")
            return False
        self._endpoints.append(endpoint)
        self.entry.clear()
        self._show_error("")
        self._render(current=len(self._endpoints) - 1)
        return True

    @Slot()
    def remove_selected(self) -> None:
        row = self.workers.currentRow()
        if not 0 <= row < len(self._endpoints):
            return
        self._results.pop(self._endpoints.pop(row), None)
        self._render(current=min(row, len(self._endpoints) - 1))

    def _show_error(self, text: str) -> None:
        """Why the entry was refused, under it; the line takes no room when there is nothing to say."""
        self.error.setText(text)
        self.error.setStyleSheet(
            text_css(self.error, ERROR_COLOR)
        )  # at show time: the theme may have changed
        self.error.setVisible(bool(text))

    # --- Test connection ------------------------------------------------------------------------------

    @property
    def testing(self) -> bool:
        return self._test is not None

    @Slot()
    def test_connections(self) -> None:
        """Ask every listed worker what it lends, on a pool thread; the answers fill in as they come."""
        endpoints = self.endpoints()
        if self.testing or not endpoints:
            return
        self._results = dict.fromkeys(endpoints, TESTING)
        worker = Worker(lambda ctx: query_all(endpoints), name="testing the remote workers")
        worker.event.connect(self._show_answer)
        worker.failed.connect(self._show_failure)
        worker.ended.connect(self._test_ended)
        self._test = worker
        self._render()  # "testing…" on every row, and Test connection disabled until the test ends
        # The shared pool, not one of the panel's own: a pool the closing dialog took along would wait for the test.
        worker.start(QThreadPool.globalInstance())

    @Slot(object)
    def _show_answer(self, memory: WorkerMemory) -> None:
        if memory.endpoint in self._results:  # not removed while the test ran
            self._results[memory.endpoint] = memory_text(memory)
            self._render()

    @Slot(object)
    def _show_failure(self, error: Exception) -> None:
        for endpoint, text in self._results.items():
            if text == TESTING:
                self._results[endpoint] = f"test failed: {error}"
        self._render()

    @Slot()
    def _test_ended(self) -> None:
        self._test = None
        self._update_buttons()

    # --- showing the list ---------------------------------------------------------------------------

    def row_text(self, endpoint: Endpoint) -> str:
        result = self._results.get(endpoint)
        return f"{endpoint}  —  {result}" if result else str(endpoint)

    def _render(self, current: int | None = None) -> None:
        """Rebuild the rows from the endpoints and the test's answers, keeping the selected row."""
        keep = self.workers.currentRow() if current is None else current
        self.workers.clear()
        self.workers.addItems([self.row_text(endpoint) for endpoint in self._endpoints])
        if 0 <= keep < len(self._endpoints):
            self.workers.setCurrentRow(keep)
        self._update_buttons()

    @Slot()
    def _update_buttons(self) -> None:
        self.remove_button.setEnabled(0 <= self.workers.currentRow() < len(self._endpoints))
        self.test_button.setEnabled(bool(self._endpoints) and not self.testing)
