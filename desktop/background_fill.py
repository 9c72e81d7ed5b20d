"""The background full prefill: after a SpecPrefill answer, while the app is idle, the engine
prefills the whole document into the target batch by batch, so follow-ups answer from it.

It runs on the engine host's background thread (EngineHost.submit_background). A new question
needs nothing from here: the engine pauses the fill the moment the question starts, and after
the answer `after_answer` starts it again, resuming where it stopped. The fill works on the
active document only; its state lives on that document's thread (doc_threads.FillState), and
FillStatus shows it in the status bar.

Before it, when a document opens, the draft reads the document ahead (`read_ahead`, setting Read
ahead on open): the first question then drafts only itself. It runs on the same background thread;
a question preempts it in the engine, and a document switch, Cancel or closing cancels it like the
fill. Once the whole document is read, the full fill follows: the draft's pass is short and speeds
up the very first answer, the target's is long and serves follow-ups.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from desktop.doc_threads import (
    FILL_FAILED,
    FILL_FILLING,
    FILL_IDLE,
    FILL_OFF,
    FILL_PAUSED,
    FILL_READING,
    FILL_READY,
    FULL_SERVED,
    DocumentThread,
    FillState,
)
from desktop.engine_host import EngineHost
from desktop.error_banner import failure_text
from desktop.worker import Worker
from engine.api import (
    BackgroundEnded,
    BackgroundProgress,
    ReadAheadEnded,
    ReadAheadProgress,
    RunSettings,
    format_count,
    format_percent_short,
)

log = logging.getLogger(__name__)

JOB_NAME = "background full prefill"
READ_AHEAD_JOB = "read-ahead"
READ_THROUGH = ("done", "not_needed")  # ReadAheadEnded statuses after which the full fill follows
# How each BackgroundEnded status shows; "cancelled" (switching documents, Settings) resumes later too.
ENDED_STATES = {
    "done": FILL_READY,
    "not_needed": FILL_READY,
    "paused": FILL_PAUSED,
    "cancelled": FILL_PAUSED,
    "failed": FILL_FAILED,
}


class BackgroundFill(QObject):
    changed = Signal(object)  # the DocumentThread whose fill state changed

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._host = host
        self._worker: Worker | None = None
        self._thread: DocumentThread | None = None  # the document the running fill works for

    @property
    def is_active(self) -> bool:
        return self._worker is not None and self._worker.active

    def after_answer(self, thread: DocumentThread, settings: RunSettings) -> None:
        """After a question: note a full document the answer left cached, else (re)start the fill
        when a SpecPrefill answer made it worth having."""
        if thread.last_served in FULL_SERVED:  # a full-prefix answer left the whole document cached
            held = thread.session.full_prefix_tokens
            self._set(thread, FillState(FILL_READY, held, held))
        elif thread.had_spec_answer or thread.fill.status == FILL_PAUSED:
            self.start(thread, settings)

    @property
    def is_reading(self) -> bool:
        return self.is_active and self._worker.name == READ_AHEAD_JOB

    def read_ahead(self, thread: DocumentThread, settings: RunSettings) -> bool:
        """A document opened: the draft reads it ahead once, then the full fill follows."""
        if not settings.read_ahead or thread.read_ahead_started or not self._host.is_ready:
            return False
        thread.read_ahead_started = True
        session, before = thread.session, thread.fill
        worker = self._host.submit_background(
            READ_AHEAD_JOB, lambda engine, ctx: engine.read_ahead(session, settings, ctx.cancel)
        )
        worker.event.connect(lambda event: self._on_read_event(worker, thread, before, event))
        worker.ended.connect(lambda: self._on_read_ended(worker, thread, before, settings))
        self._worker, self._thread, self._read_through = worker, thread, False
        self._set(thread, FillState(FILL_READING, 0, 0))
        return True

    def start(self, thread: DocumentThread, settings: RunSettings) -> bool:
        if not settings.background_prefill:
            self._set(thread, FillState(FILL_OFF, thread.fill.done, thread.fill.total))
            return False
        if not self._host.is_ready:
            return False
        session = thread.session
        worker = self._host.submit_background(
            JOB_NAME, lambda engine, ctx: engine.background_prefill(session, settings, ctx.cancel)
        )
        worker.event.connect(lambda event: self._on_event(worker, thread, event))
        worker.cancelled.connect(lambda: self._on_stopped(worker, thread))
        worker.failed.connect(lambda error: self._on_failed(worker, thread, error))
        self._worker, self._thread = worker, thread
        self._set(thread, FillState(FILL_FILLING, thread.fill.done, thread.fill.total))
        return True

    def cancel(self) -> None:
        """Stop the fill (a document switch, Clear, closing); what it filled is kept by the engine."""
        if self.is_active:
            self._worker.cancel()

    def turn_off(self, thread: DocumentThread | None) -> None:
        """Settings turned the fill off: cancel a running one, and say so."""
        self.cancel()
        if thread is not None and thread.fill.status != FILL_READY:
            self._set(thread, FillState(FILL_OFF, thread.fill.done, thread.fill.total))

    def turn_on(self, thread: DocumentThread | None) -> None:
        if thread is not None and thread.fill.status == FILL_OFF:
            self._set(
                thread,
                FillState(
                    FILL_PAUSED if thread.fill.done else FILL_IDLE, thread.fill.done, thread.fill.total
                ),
            )

    # --- the worker's reports ------------------------------------------------------------------------

    def _on_read_event(
        self, worker: Worker, thread: DocumentThread, before: FillState, event: object
    ) -> None:
        if worker is not self._worker:
            return
        if isinstance(event, ReadAheadProgress):
            self._set(thread, FillState(FILL_READING, event.done, event.total))
        elif isinstance(event, ReadAheadEnded):
            log.info(
                "read-ahead %s: %d of %d tokens in %.2f s %s",
                event.status,
                event.done,
                event.total,
                event.seconds,
                event.detail,
            )
            self._read_through = event.status in READ_THROUGH

    def _on_read_ended(
        self, worker: Worker, thread: DocumentThread, before: FillState, settings: RunSettings
    ) -> None:
        if worker is not self._worker:  # superseded: a question's fill, or another document's
            return
        self._worker = None
        self._set(thread, before)
        if self._read_through:
            self.start(thread, settings)

    def _on_event(self, worker: Worker, thread: DocumentThread, event: object) -> None:
        if worker is not self._worker:  # a fill superseded by a newer one: the newer one reports
            return
        if isinstance(event, BackgroundProgress):
            self._set(thread, FillState(FILL_FILLING, event.done, event.total))
        elif isinstance(event, BackgroundEnded):
            log.info(
                "background fill %s: %d of %d tokens in %.2f s %s",
                event.status,
                event.done,
                event.total,
                event.seconds,
                event.detail,
            )
            self._set(
                thread,
                FillState(ENDED_STATES.get(event.status, FILL_PAUSED), event.done, event.total, event.detail),
            )

    def _on_stopped(self, worker: Worker, thread: DocumentThread) -> None:
        if (
            worker is self._worker and thread.fill.status == FILL_FILLING
        ):  # cancelled before it said how it ended
            self._set(thread, FillState(FILL_PAUSED, thread.fill.done, thread.fill.total))

    def _on_failed(self, worker: Worker, thread: DocumentThread, error: Exception) -> None:
        if worker is not self._worker:
            return
        self._set(
            thread, FillState(FILL_FAILED, thread.fill.done, thread.fill.total, failure_text(error, JOB_NAME))
        )

    def _set(self, thread: DocumentThread, state: FillState) -> None:
        thread.fill = state
        self.changed.emit(thread)


# --- the status bar's view of it --------------------------------------------------------------------------

STATUS_WORDS = {
    FILL_OFF: "off",
    FILL_IDLE: "not filled",
    FILL_FILLING: "filling",
    FILL_PAUSED: "paused",
    FILL_READY: "ready",
    FILL_FAILED: "failed",
    FILL_READING: "reading ahead",
}
READY_NOTE = "Follow-ups answer from the full cached document"
OFF_TIP = "Turned off in Settings (Background full prefill)"


def fill_text(state: FillState) -> str:
    """ "Full document cache: 3,072 / 8,192 tokens — filling"; "Reading ahead: 62%" before it."""
    if state.status == FILL_READING:
        share = f": {format_percent_short(state.done / state.total)}" if state.total else ""
        return f"Reading ahead{share}"
    counts = f"{format_count(state.done)} / {format_count(state.total)} tokens — " if state.total else ""
    text = f"Full document cache: {counts}{STATUS_WORDS[state.status]}"
    return f"{text}. {READY_NOTE}" if state.status == FILL_READY else text


class FillStatus(QWidget):
    """One line and, while filling, a progress bar."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel("")
        self.label.setObjectName("fillStatus")
        self.bar = QProgressBar()
        self.bar.setMaximumWidth(120)
        self.bar.setMaximumHeight(12)
        self.bar.setTextVisible(False)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        self.show_state(None)

    def show_state(self, state: FillState | None) -> None:
        """The active document's fill; None: no document."""
        self.label.setText(fill_text(state) if state else "")
        self.label.setToolTip(
            state.detail if state and state.detail else OFF_TIP if state and state.status == FILL_OFF else ""
        )
        filling = state is not None and state.status in (FILL_FILLING, FILL_READING)
        self.bar.setVisible(filling)
        if filling:
            self.bar.setRange(0, max(state.total, 1))
            self.bar.setValue(min(state.done, state.total))

    @property
    def text(self) -> str:
        return self.label.text()
