"""Opening documents: dialogs, drag and drop, recent files, what was loaded, errors, passwords."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog

from desktop.app import load_real_document
from engine.core.cancel import CancelToken
from tests.gui.conftest import CHARS_PER_TOKEN, fake_load_document, wait


def wait_loaded(qtbot, window, name: str) -> None:
    qtbot.waitUntil(
        lambda: window.documents.document is not None and window.documents.document.path.name == name,
        timeout=3000,
    )


def test_open_file_by_dialog_shows_pages_chars_tokens_and_bypass(window, qtbot, long_pdf, monkeypatch):
    calls = []

    def fake_dialog(parent, caption, directory, filter_):
        calls.append(filter_)
        return str(long_pdf), "Documents"

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(fake_dialog))
    window.open_file_action.trigger()
    wait_loaded(qtbot, window, "report.pdf")
    assert "*.pdf" in calls[0]
    text = window.documents.document.text
    qtbot.waitUntil(lambda: window.documents.tokens is not None, timeout=3000)
    details = window.doc_info.details.text()
    assert "3 pages" in details
    assert f"{len(text):,} characters" in details
    assert f"{len(text) // CHARS_PER_TOKEN:,} tokens" in details
    assert window.doc_info.bypass.text() == "SpecPrefill will run on this document"
    assert window.doc_info.title.text() == "report.pdf"
    assert window.kept_view.segments.count() == 3


def test_short_document_is_flagged_below_threshold(window, qtbot, short_txt):
    window.open_path(str(short_txt))
    qtbot.waitUntil(lambda: window.documents.tokens is not None, timeout=3000)
    assert "1 text file" in window.doc_info.details.text()
    bypass = window.doc_info.bypass.text()
    assert bypass.startswith("SpecPrefill will be bypassed: ")
    assert "below the SpecPrefill threshold of 4096" in bypass


def test_open_folder_by_dialog_counts_files(window, qtbot, code_folder, monkeypatch):
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(code_folder)))
    window.open_folder_action.trigger()
    wait_loaded(qtbot, window, "project")
    assert "3 files" in window.doc_info.details.text()
    labels = [window.kept_view.segments.item(i).text() for i in range(3)]
    assert labels == ["README.md", "pkg/parser.py", "pkg/retry.py"]


def test_cancelled_dialog_opens_nothing(window, qtbot, monkeypatch):
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: ("", "")))
    window.open_file_action.trigger()
    qtbot.wait(50)
    assert window.documents.document is None and not window.documents.is_loading


def drop_event_for(paths: list[Path], cls=QDropEvent):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    if cls is QDragEnterEvent:
        return QDragEnterEvent(
            QPoint(100, 100),
            Qt.DropAction.CopyAction,
            mime,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        ), mime
    return QDropEvent(
        QPointF(100, 100),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    ), mime


def test_drag_and_drop_of_a_file_opens_it(window, qtbot, long_pdf):
    enter, _m1 = drop_event_for([long_pdf], QDragEnterEvent)
    window.dragEnterEvent(enter)
    assert enter.isAccepted()
    drop, _m2 = drop_event_for([long_pdf])
    window.dropEvent(drop)
    assert drop.isAccepted()
    wait_loaded(qtbot, window, "report.pdf")


def test_drag_and_drop_of_a_folder_opens_it(window, qtbot, code_folder):
    drop, _mime = drop_event_for([code_folder])
    window.dropEvent(drop)
    wait_loaded(qtbot, window, "project")
    assert window.documents.document.kind == "folder"


def test_drag_of_nothing_local_is_refused(window, tmp_path):
    mime = QMimeData()
    mime.setUrls([QUrl("https://example.com/doc.pdf"), QUrl.fromLocalFile(str(tmp_path / "missing.pdf"))])
    enter = QDragEnterEvent(
        QPoint(5, 5),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    enter.setAccepted(True)
    window.dragEnterEvent(enter)
    assert not enter.isAccepted()


def test_recent_files_list_remembers_and_reopens(window, qtbot, long_pdf, short_txt):
    window.open_path(str(long_pdf))
    wait_loaded(qtbot, window, "report.pdf")
    window.open_path(str(short_txt))
    wait_loaded(qtbot, window, "note.txt")
    window.recent_menu.rebuild()
    texts = [a.text() for a in window.recent_menu.actions() if a.text()]
    assert texts[:2] == [str(short_txt), str(long_pdf)]  # most recent first
    next(a for a in window.recent_menu.actions() if a.text() == str(long_pdf)).trigger()
    wait_loaded(qtbot, window, "report.pdf")
    assert window.store.recent_files()[0] == str(long_pdf)


def test_recent_entry_that_vanished_is_removed_with_a_message(window, qtbot, tmp_path):
    gone = tmp_path / "gone.txt"
    window.store.add_recent(str(gone))
    window.recent_menu.rebuild()
    next(a for a in window.recent_menu.actions() if a.text() == str(gone)).trigger()
    assert "no longer exists" in window.banner.text
    assert str(gone) not in window.store.recent_files()


def test_ingest_error_is_a_message_not_an_exception(window, qtbot, tmp_path):
    window.open_path(str(tmp_path / "nope.pdf"))
    qtbot.waitUntil(lambda: window.banner.kind == "error", timeout=3000)
    assert "no such file" in window.banner.text
    assert "Could not load" in window.doc_info.title.text()
    assert window.documents.document is None
    assert not window.controls.compare_button.isEnabled()


def test_ingest_warnings_are_shown(window, qtbot, tmp_path):
    path = tmp_path / "scan.pdf"
    path.write_text("first page text\f   \fthird page text", encoding="utf-8")
    window.open_path(str(path))
    wait_loaded(qtbot, window, "scan.pdf")
    assert not window.doc_info.warnings.isHidden()
    assert "page 2 has no text layer" in window.doc_info.warnings.text()


def test_encrypted_pdf_asks_for_the_password_and_retries(make_window, qtbot, tmp_path):
    asked = []

    def ask(parent, path, wrong_before):
        asked.append(wrong_before)
        return "wrong" if len(asked) == 1 else "s3cret"

    window = make_window(ask_password=ask)
    path = tmp_path / "locked.pdf"
    path.write_text("ENCRYPTED:s3cret\nsecret page one\fsecret page two", encoding="utf-8")
    window.open_path(str(path))
    wait_loaded(qtbot, window, "locked.pdf")
    assert asked == [False, True]
    assert "secret page one" in window.documents.document.text
    assert window.banner.kind == ""


def test_giving_up_on_the_password_shows_the_error(make_window, qtbot, tmp_path):
    window = make_window(ask_password=lambda *a: None)
    path = tmp_path / "locked.pdf"
    path.write_text("ENCRYPTED:pw\nbody", encoding="utf-8")
    window.open_path(str(path))
    qtbot.waitUntil(lambda: window.banner.kind == "error", timeout=3000)
    assert "password is needed" in window.banner.text


def test_real_ingest_reads_a_code_folder(make_window, qtbot, code_folder):
    """One pass through the engine's own loader (pure Python), as the app wires it."""
    window = make_window(loader=load_real_document)
    window.open_path(str(code_folder))
    wait_loaded(qtbot, window, "project")
    labels = {s.label for s in window.documents.document.segments}
    assert {"pkg/parser.py", "pkg/retry.py"} <= labels


def test_a_markdown_file_is_listed_by_its_sections(make_window, qtbot, tmp_path):
    """The engine's loader splits a text file by its headings; the window counts and lists the sections."""
    body = "A paragraph about this part of the guide, long enough to stand alone. " * 40
    path = tmp_path / "guide.md"
    path.write_text(f"# Install\n\n{body}\n\n# Use\n\n{body}\n\n# Configure\n\n{body}\n", encoding="utf-8")
    window = make_window(loader=load_real_document)
    window.open_path(str(path))
    wait_loaded(qtbot, window, "guide.md")
    qtbot.waitUntil(lambda: window.kept_view.segments.count() == 3, timeout=3000)
    assert "3 sections" in window.doc_info.details.text()
    assert [window.kept_view.segments.item(i).text() for i in range(3)] == ["Install", "Use", "Configure"]


def slow_loader(delay_s: float):
    """The fake loader, but each page takes `delay_s` (honouring cancel meanwhile)."""

    def load(path, *, password=None, cancel=None, progress=None):
        token = cancel or CancelToken()

        def slow_progress(done, total, label):
            wait(delay_s, token)
            if progress:
                progress(done, total, label)

        return fake_load_document(path, password=password, cancel=token, progress=slow_progress)

    return load


def test_ingestion_reports_progress_and_cancel_stops_it(make_window, qtbot, long_pdf):
    window = make_window(loader=slow_loader(0.3))
    window.open_path(str(long_pdf))
    assert window.controls.cancel_button.isEnabled()
    assert not window.doc_info.progress.isHidden()
    qtbot.waitUntil(lambda: window.doc_info.progress_label.text() == "page 1", timeout=2000)
    assert window.doc_info.progress.maximum() == 3 and window.doc_info.progress.value() == 1
    window.controls.cancel_button.click()
    qtbot.waitUntil(lambda: not window.documents.is_loading, timeout=1000)
    assert "cancelled" in window.doc_info.title.text()
    assert window.documents.document is None
    assert window.doc_info.progress.isHidden()
    assert not window.controls.cancel_button.isEnabled()
