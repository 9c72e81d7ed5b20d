"""Opening a document: the file dialogs, the recent list, drops, the password prompt, and the load's outcome."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog, QInputDialog, QLineEdit, QWidget

from desktop.model.failure_text import failure_text
from desktop.window.document_paths import OPEN_FILE_FILTER, dropped_paths
from desktop.window.parts import WindowHooks, WindowSessions, WindowViews
from engine.api import Document, PasswordError

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
    def __init__(
        self, views: WindowViews, sessions: WindowSessions, hooks: WindowHooks, ask_password: PasswordPrompt
    ) -> None:
        self._views, self._sessions, self._hooks = views, sessions, hooks
        self._ask_password = ask_password
        documents = sessions.documents
        documents.loadStarted.connect(self._on_loading)
        documents.progress.connect(views.doc_info.show_progress)
        documents.loaded.connect(self._on_loaded)
        documents.failed.connect(self._on_failed)
        documents.cancelled.connect(self._on_cancelled)
        documents.tokensCounted.connect(self._on_tokens_counted)
        documents.tokenCountFailed.connect(self._on_token_count_failed)

    # --- asking for a path ---------------------------------------------------------------------

    def open_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self._views.dialog_parent, "Open a document", self._dialog_dir(), OPEN_FILE_FILTER
        )
        if path:
            self.open_path(path)

    def open_folder_dialog(self) -> None:
        parent = self._views.dialog_parent
        path = QFileDialog.getExistingDirectory(parent, "Open a code folder", self._dialog_dir())
        if path:
            self.open_path(path)

    def open_recent(self, path: str) -> None:
        if not Path(path).exists():
            self._sessions.store.remove_recent(path)
            self._views.banner.show_error(f"{path} no longer exists; it was removed from the recent list.")
            return
        self.open_path(path)

    def open_path(self, path: str) -> bool:
        if not self._hooks.enablement().open_document:
            self._views.banner.show_info(RUN_PINS_DOCUMENT)
            return False
        self._sessions.documents.load(path)
        return True

    def drag_entered(self, event: QDragEnterEvent) -> None:
        """A drag (enter or move) is accepted when it carries a path and a document may open now."""
        if dropped_paths(event.mimeData()) and self._hooks.enablement().open_document:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropped(self, event: QDropEvent) -> None:
        paths = dropped_paths(event.mimeData())
        if not paths:
            event.ignore()
            return
        if len(paths) > 1:
            self._views.status_bar.showMessage(f"Opened the first of {len(paths)} dropped items", 5000)
        if self.open_path(paths[0]):
            event.acceptProposedAction()

    def _dialog_dir(self) -> str:
        recent = self._sessions.store.recent_files()
        return str(Path(recent[0]).parent) if recent else str(Path.home())

    # --- the load's outcome --------------------------------------------------------------------

    def _on_loading(self, path: str) -> None:
        self._views.doc_info.show_loading(path)
        self._hooks.apply_enablement()

    def _on_loaded(self, document: Document) -> None:
        views, sessions = self._views, self._sessions
        sessions.fill.cancel()  # the fill works on the active document only
        thread = sessions.threads.open(document)
        views.thread_view.show_thread(thread)
        views.fill_status.show_state(thread.fill)
        views.compare_caption.hide()
        views.doc_info.show_document(document)
        if sessions.host.is_ready:
            views.doc_info.show_counting()
        views.kept_view.set_document(document)
        sessions.store.add_recent(str(document.path))
        self._hooks.refresh_ab_context()
        self._hooks.apply_enablement()

    def _on_failed(self, path: str, error: Exception, password_given: bool) -> None:
        if isinstance(error, PasswordError):
            # given before: it was wrong
            password = self._ask_password(self._views.dialog_parent, path, password_given)
            if password is not None:
                self._sessions.documents.load(path, password=password)
                return
        message = failure_text(error, f"loading {path}")
        self._views.doc_info.show_failed(path, message)
        self._views.banner.show_error(message)
        self._hooks.apply_enablement()

    def _on_cancelled(self, path: str) -> None:
        self._views.doc_info.show_cancelled(path)
        self._hooks.apply_enablement()

    def _on_tokens_counted(self, document: Document, tokens: int) -> None:
        self._views.doc_info.show_token_count(tokens)
        self._hooks.refresh_prediction()
        thread = self._sessions.threads.active
        if thread is not None and thread.document is document:
            # After the count, an engine job that would cancel it: the draft reads while the question is typed
            self._sessions.fill.read_ahead(thread, self._hooks.run_settings())

    def _on_token_count_failed(self, error: Exception) -> None:
        self._views.banner.show_error(
            f"Could not count the document's tokens: {failure_text(error, 'token count')}"
        )
