"""What was loaded: name, pages or files, characters, tokens (and how they sit in the target's window),
predicted TTFTs, bypass, warnings, progress."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from desktop.model.prediction import Prediction
from desktop.widgets.theme import text_css
from engine.api import Document, format_count, format_percent_short, format_seconds

MAX_WARNINGS_SHOWN = 3
NOT_CALIBRATED = (
    "Predicted TTFT: not calibrated: use Models ▸ Calibrate This Machine… (or `specprefill calibrate`)"
)
RUNS_COLOR, BYPASSED_COLOR = "#1b5e20", "#8a5300"


def describe_parts(document: Document) -> str:
    """ "12 pages", "48 files", "6 sections" (a text file's, by its headings) or "1 text file"."""
    n = len(document.segments)
    noun = {"pdf": "page", "folder": "file"}.get(document.kind, "section" if n > 1 else "text file")
    return f"{format_count(n)} {noun}{'' if n == 1 else 's'}"


def tokens_text(count: int, prediction: Prediction | None) -> str:
    """ "8,000 tokens", and for a document longer than the window what each run makes of it."""
    text = f"{format_count(count)} tokens"
    if prediction is None or prediction.fit.fits:
        return text
    return f"{text} · {over_window_text(prediction.fit, prediction.keep)}"


def over_window_text(fit, keep: float) -> str:
    """ "1.9× the 32,768-token window · SpecPrefill keeps 20% (fits by selection); a full prefill
    would see only the first 52%": what the user trades before choosing a run."""
    return (
        f"{fit.windows:.1f}× the {format_count(fit.n_ctx)}-token window · "
        f"SpecPrefill keeps {format_percent_short(fit.spec_keep(keep))} (fits by selection); "
        f"a full prefill would see only the first {format_percent_short(fit.keep_to_fit())}"
    )


def prediction_text(estimate: dict | None) -> str:
    """One line from Engine.estimate's figures: both TTFTs, SpecPrefill's two parts, the speed-up."""
    if estimate is None:
        return NOT_CALIBRATED
    # For a document longer than the window the full prefill's time is that of its cut prompt.
    cut = "" if estimate.get("fits", True) else " (cut to fit)"
    return (
        f"Predicted TTFT at keep {format_percent_short(estimate['keep'])}: "
        f"full prefill{cut} {format_seconds(estimate['baseline_ttft_s'])} → "
        f"SpecPrefill {format_seconds(estimate['spec_ttft_s'])} "
        f"(draft {format_seconds(estimate['draft_s'])} + prefill {format_seconds(estimate['target_prefill_s'])}) · "
        f"speed-up {estimate['speedup']:.2f}×"
    )


def bypass_text(reason: str) -> str:
    return f"SpecPrefill will be bypassed: {reason}" if reason else "SpecPrefill will run on this document"


class DocumentInfoBar(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("No document. Open a PDF, a text file or a code folder, or drop one here.")
        self.title.setStyleSheet("font-weight: bold;")
        self.details = QLabel("")
        self.details.setObjectName("documentDetails")
        self.prediction = QLabel("")
        self.prediction.setObjectName("prediction")
        self.prediction.setToolTip(
            "From this machine's calibration, for the document's tokens "
            "(the system prompt and the question add a few more)"
        )
        self.bypass = QLabel("")
        self.bypass.setObjectName("bypass")
        self.bypass.setWordWrap(True)
        self.warnings = QLabel("")
        self.warnings.setObjectName("ingestWarnings")
        self.warnings.setWordWrap(True)
        self.warnings.setStyleSheet(text_css(self.warnings, BYPASSED_COLOR))
        self.warnings.hide()
        for label in (self.title, self.details, self.prediction, self.bypass, self.warnings):
            label.setTextFormat(Qt.TextFormat.PlainText)  # file names and messages are not markup
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(260)
        self.progress.setMaximumHeight(14)
        self.progress.hide()
        self.progress_label = QLabel("")
        self.progress_label.hide()
        self._characters = ""
        self._tokens = ""
        self._token_count: int | None = None  # the document's, once counted

        top = QHBoxLayout()
        top.addWidget(self.title)
        top.addWidget(self.details)
        top.addStretch(1)
        top.addWidget(self.progress_label)
        top.addWidget(self.progress)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.prediction)
        layout.addWidget(self.bypass)
        layout.addWidget(self.warnings)

    def show_loading(self, path: str) -> None:
        self.title.setText(f"Loading {path}…")
        self.details.setText("")
        self._token_count = None  # the previous document's: no longer shown
        self.show_prediction(None)
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
        self._characters = f"{describe_parts(document)} · {format_count(len(document.text))} characters"
        self._token_count = None
        self._tokens = "tokens: counted once the models are loaded"
        self._refresh_details()
        self.show_prediction(None)
        self._show_warnings(document.warnings)

    def show_token_count(self, tokens: int) -> None:
        self._token_count = tokens
        self._show_tokens(None)

    def show_prediction(self, prediction: Prediction | None) -> None:
        """The predicted TTFTs, the bypass decision and the window fit; None (no count or no engine)
        clears them."""
        self._show_tokens(prediction)
        if prediction is None:
            self.prediction.setText("")
            self.bypass.setText("")
            return
        self.prediction.setText(prediction_text(prediction.estimate))
        self.bypass.setText(bypass_text(prediction.bypass_reason))
        self.bypass.setStyleSheet(
            text_css(self.bypass, BYPASSED_COLOR if prediction.bypass_reason else RUNS_COLOR)
        )

    def show_counting(self) -> None:
        self._token_count = None
        self._tokens = "counting tokens…"
        self._refresh_details()

    def _show_tokens(self, prediction: Prediction | None) -> None:
        """The count, with the window's figures when a prediction has them (the window is the
        loaded engine's: without one, the count alone)."""
        if self._token_count is None:
            return
        self._tokens = tokens_text(self._token_count, prediction)
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
