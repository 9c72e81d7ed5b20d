"""Opening a document: the file dialogs, the recent list, drops, the password prompt, and the load's outcome."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog, QInputDialog, QLineEdit, QWidget

from desktop.document_paths import OPEN_FILE_FILTER, dropped_paths
from desktop.error_banner import failure_text
from engine.api import Document, PasswordError

if TYPE_CHECKING:
    from desktop.main_window import MainWindow

RUN_PINS_DOCUMENT = "A run is in progress: wait for it or cancel it before opening another document."

# ask_password(parent, path, wrong_before) -> password, or None when the user gives up
PasswordPrompt = Callable[[QWidget, str, bool], "str | None"]


def ask_password_dialog(parent: QWidget, path: str, wrong_before: bool) -> str | None:
    prompt = "The password was wrong. Try again:" if wrong_before else "This PDF is encrypted. Password:"
    text, ok = QInputDialog.getText(
        parent, f"Password for {Path(path).name}", prompt, QLineEdit.EchoMode.Password
    )
    return text if ok else None


class DocumentFlow:
    def __init__(self, window: MainWindow, ask_password: PasswordPrompt) -> None:
        self._window = window
        self._ask_password = ask_password
        documents = window.documents
        documents.loadStarted.connect(self._on_loading)
        documents.progress.connect(window.doc_info.show_progress)
        documents.loaded.connect(self._on_loaded)
        documents.failed.connect(self._on_failed)
        documents.cancelled.connect(self._on_cancelled)
        documents.tokensCounted.connect(self._on_tokens_counted)
        documents.tokenCountFailed.connect(self._on_token_count_failed)

    # --- asking for a path ---------------------------------------------------------------------

    def open_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self._window, "Open a document", self._dialog_dir(), OPEN_FILE_FILTER
        )
        if path:
            self.open_path(path)

    def open_folder_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self._window, "Open a code folder", self._dialog_dir())
        if path:
            self.open_path(path)

    def open_recent(self, path: str) -> None:
        window = self._window
        if not Path(path).exists():
            window.store.remove_recent(path)
            window.banner.show_error(f"{path} no longer exists; it was removed from the recent list.")
            return
        self.open_path(path)

    def open_path(self, path: str) -> bool:
        window = self._window
        if not window.enablement().open_document:
            window.banner.show_info(RUN_PINS_DOCUMENT)
            return False
        window.documents.load(path)
        return True

    def drag_entered(self, event: QDragEnterEvent) -> None:
        """A drag (enter or move) is accepted when it carries a path and a document may open now."""
        if dropped_paths(event.mimeData()) and self._window.enablement().open_document:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropped(self, event: QDropEvent) -> None:
        paths = dropped_paths(event.mimeData())
        if not paths:
            event.ignore()
            return
        if len(paths) > 1:
            self._window.statusBar().showMessage(f"Opened the first of {len(paths)} dropped items", 5000)
        if self.open_path(paths[0]):
            event.acceptProposedAction()

    def _dialog_dir(self) -> str:
        recent = self._window.store.recent_files()
        return str(Path(recent[0]).parent) if recent else str(Path.home())

    # --- the load's outcome --------------------------------------------------------------------

    def _on_loading(self, path: str) -> None:
        self._window.doc_info.show_loading(path)
        self._window.apply_enablement()

    def _on_loaded(self, document: Document) -> None:
        window = self._window
        window.fill.cancel()  # the fill works on the active document only
        window.thread = window.threads.open(document)
        window.thread_view.show_thread(window.thread)
        window.fill_status.show_state(window.thread.fill)
        window.compare_caption.hide()
        window.doc_info.show_document(document)
        if window.host.is_ready:
            window.doc_info.show_counting()
        window.kept_view.set_document(document)
        window.store.add_recent(str(document.path))
        window.ab_flow.refresh_context()
        window.apply_enablement()

    def _on_failed(self, path: str, error: Exception, password_given: bool) -> None:
        window = self._window
        if isinstance(error, PasswordError):
            password = self._ask_password(window, path, password_given)  # given before: it was wrong
            if password is not None:
                window.documents.load(path, password=password)
                return
        message = failure_text(error, f"loading {path}")
        window.doc_info.show_failed(path, message)
        window.banner.show_error(message)
        window.apply_enablement()

    def _on_cancelled(self, path: str) -> None:
        self._window.doc_info.show_cancelled(path)
        self._window.apply_enablement()

    def _on_tokens_counted(self, document: Document, tokens: int) -> None:
        window = self._window
        window.doc_info.show_token_count(tokens)
        window.refresh_prediction()
        if window.thread is not None and window.thread.document is document:
            # After the count, an engine job that would cancel it: the draft reads while the question is typed
            window.fill.read_ahead(window.thread, window.run_settings())

    def _on_token_count_failed(self, error: Exception) -> None:
        self._window.banner.show_error(
            f"Could not count the document's tokens: {failure_text(error, 'token count')}"
        )
