"""One run's live view ("Full prefill" or "SpecPrefill"): stage, progress, TTFT, stats, answer.

A run on a document longer than the target's window says how much of it the target saw
(a truncated full prefill, or SpecPrefill's selection), right under its TTFT.

With a calibrated machine, the draft and prefill stages show about how long they have left
("about 3m20s left"), from the cost model's time for the stage and the share of tokens still to go.

The answer streams as plain text; once the run finishes it renders as Markdown, unless the
pane's Markdown toggle is off. Copy puts the answer's text on the clipboard; Save writes it,
with the question and the run's facts, to a Markdown file.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QGuiApplication, QTextCursor
from PySide6.QtWidgets import (
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.model.answer_export import answer_markdown, suggested_file_name
from desktop.model.run_progress import (
    POSITION_TEXT,
    STAGE_TEXT,
    TTFT_CAPTION,
    eta_seconds,
    eta_text,
    ttft_caption,
)
from desktop.widgets.theme import text_css
from engine.api import (
    Notice,
    Progress,
    RunFinished,
    RunResult,
    SelectionMade,
    StageChanged,
    TokenGenerated,
    fit_note,
    format_count,
    format_percent_short,
    format_rate,
    format_seconds,
    selection_note,
    write_text_atomic,
)

log = logging.getLogger(__name__)

NOT_YET = "—"
TTFT_PROVISIONAL = "time to first token (as measured here; the engine's figure follows)"
MARKDOWN_FILTER = "Markdown (*.md);;All files (*)"
FIT_COLOR = "#8a5300"  # the document line's colour for a bypass: this too is a run that saw less


def ask_save_path(parent: QWidget, suggested: str) -> str | None:
    """The file to save an answer to, or None when the user cancels (tests replace this)."""
    path, _ = QFileDialog.getSaveFileName(
        parent, "Save answer", str(Path.home() / suggested), MARKDOWN_FILTER
    )
    return path or None


class RunPane(QFrame):
    markdownToggled = Signal(bool)  # the user flipped this pane's Markdown toggle
    saveFailed = Signal(str)  # why an answer could not be saved

    def __init__(self, run: str, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run = run
        self.title_text = title
        self.setObjectName(f"{run}Pane")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._result: RunResult | None = None
        self._stage_started: float | None = None
        self._stage_seconds: dict[str, float] = {}  # the cost model's time for each long stage of this run
        self._max_new_tokens = 0
        self._generated = 0
        self._answer_text = ""  # the answer as generated (Markdown source), whatever the view shows
        self._question = ""
        self._document_name = ""

        self.title = QLabel(title)
        self.title.setStyleSheet("font-weight: bold; font-size: 15px;")
        self.status = QLabel("Idle")
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        self.eta = QLabel("")
        self.eta.setObjectName("eta")
        self.eta.setStyleSheet("color: palette(mid);")
        self.eta.hide()
        self.ttft = QLabel(NOT_YET)
        self.ttft.setObjectName("ttft")
        big = QFont(self.font())
        big.setPointSize(26)
        big.setBold(True)
        self.ttft.setFont(big)
        self.ttft_caption = QLabel(TTFT_CAPTION)
        self.ttft_caption.setStyleSheet("color: palette(mid);")
        self.fit = QLabel("")
        self.fit.setObjectName("fit")
        self.fit.setStyleSheet(text_css(self.fit, FIT_COLOR) + " font-weight: bold;")
        self.fit.hide()
        self.prefilled = QLabel(NOT_YET)
        self.decode = QLabel(NOT_YET)
        self.kept = QLabel(NOT_YET)
        self.positions = QLabel(NOT_YET)
        self.notice = QLabel("")
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet(
            "background: #fff3cd; color: #664d03; border: 1px solid #ffe69c; padding: 4px;"
        )
        self.notice.hide()
        for label in (self.status, self.notice):
            label.setTextFormat(Qt.TextFormat.PlainText)  # engine messages are not markup
        self.answer = QTextBrowser()
        self.answer.setOpenLinks(False)  # a link in a model's answer is text to read, not to follow
        self.answer.setPlaceholderText("The answer streams here.")
        self._create_answer_buttons()
        self._build_layout()
        self._refresh_answer_buttons()

    def _create_answer_buttons(self) -> None:
        self.copy_button = QToolButton(text="Copy", toolTip="Copy the answer to the clipboard")
        self.copy_button.clicked.connect(self.copy_answer)
        self.save_button = QToolButton(
            text="Save…", toolTip="Save the question, answer and run facts as Markdown"
        )
        self.save_button.clicked.connect(self.save_answer)
        self.markdown_button = QToolButton(
            text="Markdown",
            checkable=True,
            checked=True,
            toolTip="Render the finished answer as Markdown (off: plain text)",
        )
        self.markdown_button.toggled.connect(self._on_markdown_toggled)

    @property
    def is_spec(self) -> bool:
        return self.run == "spec"

    @property
    def result(self) -> RunResult | None:
        return self._result

    def _build_layout(self) -> None:
        stats = QFormLayout()
        stats.setLabelAlignment(Qt.AlignmentFlag.AlignRight)
        stats.addRow("Tokens prefilled:", self.prefilled)
        stats.addRow("Decode:", self.decode)
        if self.is_spec:
            stats.addRow("Kept:", self.kept)
            stats.addRow("Positions:", self.positions)

        layout = QVBoxLayout(self)
        layout.addLayout(self._title_row())
        layout.addWidget(self.status)
        layout.addWidget(self.progress)
        layout.addWidget(self.eta)
        layout.addWidget(self.ttft)
        layout.addWidget(self.ttft_caption)
        layout.addWidget(self.fit)
        layout.addLayout(stats)
        layout.addWidget(self.notice)
        layout.addWidget(self.answer, 1)

    def _title_row(self) -> QHBoxLayout:
        """The title, then the answer's buttons: on one line, so the pane grows no taller."""
        row = QHBoxLayout()
        row.addWidget(self.title)
        row.addStretch(1)
        for button in (self.markdown_button, self.copy_button, self.save_button):
            row.addWidget(button)
        return row

    # --- lifecycle ---------------------------------------------------------------------------

    def begin(
        self,
        max_new_tokens: int,
        waiting_for: str | None = None,
        *,
        question: str = "",
        document_name: str = "",
        stage_seconds: dict[str, float] | None = None,
    ) -> None:
        """Clear the pane for a new run; `waiting_for` names the run this one queues behind.
        The question and document name go into a saved answer; `stage_seconds` (stage_predictions)
        times the long stages for their "about … left", None: no estimate (not calibrated)."""
        self._result = None
        self._stage_seconds = dict(stage_seconds or {})
        self._show_eta(None)
        self._question = question
        self._document_name = document_name
        self._answer_text = ""
        self._stage_started = None
        self._max_new_tokens = max_new_tokens
        self._generated = 0
        self.status.setText(f"Waiting for {waiting_for}…" if waiting_for else "Starting…")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        for label in (self.ttft, self.prefilled, self.decode, self.kept, self.positions):
            label.setText(NOT_YET)
        self.ttft.setStyleSheet("")
        self.ttft_caption.setText(TTFT_CAPTION)
        self._show_fit("")
        self.notice.clear()
        self.notice.hide()
        self.answer.clear()
        self._refresh_answer_buttons()

    def mark_cancelling(self) -> None:
        if self._result is None:
            self.status.setText("Cancelling…")
            self._show_eta(None)

    def mark_cancelled(self) -> None:
        if self._result is None:
            self.status.setText("Cancelled")
            self._show_eta(None)
            self.progress.setRange(0, 1)
            self.progress.setValue(0)

    def mark_failed(self, message: str) -> None:
        if self._result is None:
            self.status.setText(f"Failed: {message}")
            self._show_eta(None)
            self.progress.setRange(0, 1)
            self.progress.setValue(0)

    def add_notice(self, message: str) -> None:
        text = self.notice.text()
        self.notice.setText(f"{text}\n{message}" if text else message)
        self.notice.show()

    # --- events --------------------------------------------------------------------------------

    def apply(self, event: object) -> None:
        if isinstance(event, StageChanged):
            self._on_stage(event)
        elif isinstance(event, Progress):
            self._on_progress(event)
        elif isinstance(event, TokenGenerated):
            self._on_token(event)
        elif isinstance(event, SelectionMade):
            self._on_selection(event)
        elif isinstance(event, RunFinished):
            self._on_finished(event.result)
        elif isinstance(event, Notice):
            self.add_notice(event.message)

    def _on_stage(self, event: StageChanged) -> None:
        if self._stage_started is None:
            self._stage_started = time.monotonic()
        # The engine's detail already names the stage ("prefilling 1600 of 8000 tokens").
        text = event.detail[:1].upper() + event.detail[1:] if event.detail else None
        self.status.setText(text or f"{STAGE_TEXT.get(event.stage, event.stage.capitalize())}…")
        self._update_eta(event.stage, 0, 1)  # a timed stage starts with all of it left; any other hides it
        if event.stage == "generating":
            self.progress.setRange(0, max(self._max_new_tokens, 1))
            self.progress.setValue(0)
        elif event.stage == "done":
            self.progress.setRange(0, 1)
            self.progress.setValue(1)
        else:
            self.progress.setRange(0, 0)  # busy until the first Progress says how far

    def _on_progress(self, event: Progress) -> None:
        text = STAGE_TEXT.get(event.stage, event.stage.capitalize())
        self.status.setText(f"{text} {format_count(event.done)} of {format_count(event.total)} tokens")
        self.progress.setRange(0, max(event.total, 1))
        self.progress.setValue(min(event.done, event.total))
        self._update_eta(event.stage, event.done, event.total)

    def _update_eta(self, stage: str, done: int, total: int) -> None:
        self._show_eta(eta_seconds(self._stage_seconds.get(stage), done, total))

    def _show_eta(self, seconds: float | None) -> None:
        """ "about 3m20s left" under the progress bar; hidden for None."""
        self.eta.setText("" if seconds is None else eta_text(seconds))
        self.eta.setVisible(seconds is not None)

    def _on_token(self, event: TokenGenerated) -> None:
        if self._generated == 0 and self._stage_started is not None:
            # Until the run reports its exact TTFT, show what the user actually waited.
            self.ttft.setText(format_seconds(time.monotonic() - self._stage_started))
            self.ttft.setStyleSheet("color: palette(mid);")
            self.ttft_caption.setText(TTFT_PROVISIONAL)
        self._generated = event.index + 1
        self.status.setText(f"Generating: {format_count(self._generated)} tokens")
        self.progress.setValue(min(self._generated, self.progress.maximum()))
        self._append_answer(event.text)
        self._answer_text += event.text
        self._refresh_answer_buttons()

    def _append_answer(self, text: str) -> None:
        """Append at the end; keep following the text only if the reader was already at the bottom."""
        bar = self.answer.verticalScrollBar()
        following = bar.value() >= bar.maximum()
        cursor = QTextCursor(self.answer.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        if following:
            bar.setValue(bar.maximum())

    def _on_selection(self, event: SelectionMade) -> None:
        selection = event.selection
        if selection.chunk_starts:
            self.kept.setText(f"{len(selection.kept_chunks)} of {len(selection.chunk_starts)} chunks")

    def _on_finished(self, result: RunResult) -> None:
        self._result = result
        self._show_eta(None)
        self.status.setText("Done" + (f" ({result.stop_reason})" if result.stop_reason else ""))
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.ttft.setText(format_seconds(result.ttft_s))
        self.ttft.setStyleSheet("")
        self.ttft_caption.setText(ttft_caption(result))
        self._show_fit(fit_note(result))
        self.prefilled.setText(
            f"{format_count(result.prefill_tokens)} of {format_count(result.prompt_tokens)}"
        )
        self.decode.setText(format_rate(result.decode_tok_s))
        if result.answer:
            self._answer_text = result.answer  # the final answer is authoritative
        self._render_answer()
        self._refresh_answer_buttons()
        if self.is_spec:
            self._show_spec_result(result)

    def _show_fit(self, text: str) -> None:
        """How much of a too-long document the run saw; hidden for a run that saw it all."""
        self.fit.setText(text)
        self.fit.setVisible(bool(text))

    def _show_spec_result(self, result: RunResult) -> None:
        if result.bypassed:
            self.kept.setText("100% (bypassed)")
            self.positions.setText("contiguous")
            reason = f": {result.bypass_reason}" if result.bypass_reason else ""
            # Replaces the engine's own "bypassed: ..." notice rather than repeating it. The reason
            # says why: below a fixed threshold, or no gain predicted by the calibration.
            self.notice.setText(f"SpecPrefill bypassed{reason}")
            self.notice.show()
            return
        kept = f"{format_percent_short(result.kept_fraction)} of {format_count(result.prompt_tokens)} tokens"
        note = selection_note(result)
        self.kept.setText(f"{kept} · {note}" if note else kept)
        self.positions.setText(POSITION_TEXT.get(result.positions, result.positions))

    # --- the answer: rendering, copy, save ------------------------------------------------------------

    @property
    def answer_text(self) -> str:
        """The answer as the model wrote it (Markdown source), streamed so far or final."""
        return self._answer_text

    @property
    def renders_markdown(self) -> bool:
        return self.markdown_button.isChecked()

    def set_markdown(self, on: bool) -> None:
        """Set the toggle without emitting markdownToggled (the window syncs both panes with it)."""
        self.markdown_button.blockSignals(True)
        self.markdown_button.setChecked(on)
        self.markdown_button.blockSignals(False)
        self._render_answer()

    def _on_markdown_toggled(self, on: bool) -> None:
        self._render_answer()
        self.markdownToggled.emit(on)

    def _render_answer(self) -> None:
        """A finished answer as Markdown or plain text; a streaming or stopped one stays plain."""
        if self._result is None:
            return
        if self.renders_markdown:
            self.answer.setMarkdown(self._answer_text)
        else:
            self.answer.setPlainText(self._answer_text)

    def _refresh_answer_buttons(self) -> None:
        self.copy_button.setEnabled(bool(self._answer_text))
        self.save_button.setEnabled(self._result is not None)  # the saved file carries the run's facts

    def copy_answer(self) -> None:
        QGuiApplication.clipboard().setText(self._answer_text)

    def save_answer(self) -> Path | None:
        """Ask where, then write the question, answer and run facts there atomically."""
        if self._result is None:
            return None
        path = ask_save_path(self, suggested_file_name(self.run, self._question))
        if path is None:
            return None
        text = answer_markdown(
            self.title_text, self._question, self._document_name, self._result_with_answer()
        )
        try:
            write_text_atomic(path, text)
        except OSError as exc:
            log.warning("could not save the answer to %s: %s", path, exc)
            self.saveFailed.emit(f"Could not save the answer to {path}: {exc.strerror or exc}")
            return None
        return Path(path)

    def _result_with_answer(self) -> RunResult:
        """The result with the answer shown (the engine's, or the streamed text when it sent none)."""
        result = self._result
        return result if result.answer else replace(result, answer=self._answer_text)
