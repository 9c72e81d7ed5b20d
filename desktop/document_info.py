"""What was loaded: name, pages or files, characters, tokens, threshold, warnings, ingest progress."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from engine.ingest.document import Document
from desktop.formatting import fmt_count

MAX_WARNINGS_SHOWN = 3


def describe_parts(document: Document) -> str:
    """"12 pages", "48 files" or "1 text file"."""
    n = len(document.segments)
    noun = {"pdf": "page", "folder": "file"}.get(document.kind, "text file")
    return f"{fmt_count(n)} {noun}{'' if n == 1 else 's'}"


def threshold_text(tokens: int, min_tokens: int) -> str:
    if tokens >= min_tokens:
        return f"above the SpecPrefill threshold ({fmt_count(min_tokens)} tokens)"
    return f"below the SpecPrefill threshold ({fmt_count(min_tokens)} tokens): SpecPrefill will be bypassed"


class DocumentInfoBar(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("No document. Open a PDF, a text file or a code folder, or drop one here.")
        self.title.setStyleSheet("font-weight: bold;")
        self.details = QLabel("")
        self.details.setObjectName("documentDetails")
        self.threshold = QLabel("")
        self.threshold.setObjectName("threshold")
        self.warnings = QLabel("")
        self.warnings.setObjectName("ingestWarnings")
        self.warnings.setWordWrap(True)
        self.warnings.setStyleSheet("color: #8a5300;")
        self.warnings.hide()
        for label in (self.title, self.details, self.threshold, self.warnings):
            label.setTextFormat(Qt.TextFormat.PlainText)  # file names and messages are not markup
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.setMaximumHeight(14)
        self.progress.hide()
        self.progress_label = QLabel("")
        self.progress_label.hide()
        self._characters = ""
        self._tokens = ""

        top = QHBoxLayout()
        top.addWidget(self.title)
        top.addWidget(self.details)
        top.addStretch(1)
        top.addWidget(self.progress_label)
        top.addWidget(self.progress)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.threshold)
        layout.addWidget(self.warnings)

    def show_loading(self, path: str) -> None:
        self.title.setText(f"Loading {path}…")
        self.details.setText("")
        self.threshold.setText("")
        self.warnings.hide()
        self.progress.setRange(0, 0)
        self.progress.show()
        self.progress_label.setText("")
        self.progress_label.show()

    def show_progress(self, done: int, total: int, label: str) -> None:
        self.progress.setRange(0, max(total, 0))
        self.progress.setValue(min(done, total) if total > 0 else 0)
        self.progress_label.setText(label)

    def show_failed(self, path: str, message: str) -> None:
        self._hide_progress()
        self.title.setText(f"Could not load {path}")
        self.details.setText(message)

    def show_cancelled(self, path: str) -> None:
        self._hide_progress()
        self.title.setText(f"Loading {path} was cancelled")

    def show_document(self, document: Document) -> None:
        self._hide_progress()
        self.title.setText(document.path.name or str(document.path))
        self.title.setToolTip(str(document.path))
        self._characters = f"{describe_parts(document)} · {fmt_count(len(document.text))} characters"
        self._tokens = "tokens: counted once the models are loaded"
        self._refresh_details()
        self.threshold.setText("")
        self._show_warnings(document.warnings)

    def show_token_count(self, tokens: int, min_tokens: int) -> None:
        self._tokens = f"{fmt_count(tokens)} tokens"
        self._refresh_details()
        self.threshold.setText(threshold_text(tokens, min_tokens))
        color = "#1b5e20" if tokens >= min_tokens else "#8a5300"
        self.threshold.setStyleSheet(f"color: {color};")

    def show_counting(self) -> None:
        self._tokens = "counting tokens…"
        self._refresh_details()

    def _refresh_details(self) -> None:
        self.details.setText(f"{self._characters} · {self._tokens}")

    def _show_warnings(self, warnings: list[str]) -> None:
        if not warnings:
            self.warnings.hide()
            return
        shown = warnings[:MAX_WARNINGS_SHOWN]
        more = len(warnings) - len(shown)
        text = "Warnings: " + "; ".join(shown) + (f"; and {more} more" if more else "")
        self.warnings.setText(text)
        self.warnings.setToolTip("\n".join(warnings))
        self.warnings.show()

    def _hide_progress(self) -> None:
        self.progress.hide()
        self.progress_label.hide()
