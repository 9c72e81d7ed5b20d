"""The background full prefill: after a SpecPrefill answer, while the app is idle, the engine
prefills the whole document into the target batch by batch, so follow-ups answer from it.

It runs on the engine host's background thread (EngineHost.start_background: the engine's
BackgroundThread, its events queued to the GUI thread), as work built by engine.api's
background_work. A new question needs nothing from here: the engine pauses the fill the moment
the question starts, and after the answer `after_answer` starts it again, resuming where it
stopped. The fill works on the active document only; its state lives on that document's thread
(doc_threads.FillState), and desktop.widgets.fill_status shows it in the status bar.

Before it, when a document opens, the draft reads the document ahead (`read_ahead`, setting Read
ahead on open): the first question then drafts only itself. It runs on the same background thread;
a question preempts it in the engine, and a document switch, Cancel or closing cancels it like the
fill. Once the whole document is read, the full fill follows: the draft's pass is short and speeds
up the very first answer, the target's is long and serves follow-ups.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, Slot

from desktop.model.doc_threads import (
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
from desktop.model.failure_text import failure_text
from desktop.sessions.background_lane import BackgroundJob
from desktop.sessions.engine_host import EngineHost
from engine.api import (
    BackgroundEnded,
    BackgroundProgress,
    ReadAheadEnded,
    ReadAheadProgress,
    RunSettings,
    background_work,
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
NOTHING_TO_FILL = "not_needed"  # how a fill that background_work found no need for ends


@dataclass(eq=False)
class _Pass:
    """One pass on the background thread: the draft's read-ahead, or the target's full fill."""

    job: BackgroundJob
    thread: DocumentThread  # the document it works for
    settings: RunSettings
    reading: bool  # the read-ahead; else the fill
    before: FillState  # the state before a read-ahead, shown again once it ends
    end: ReadAheadEnded | BackgroundEnded | None = None  # how the engine said it ended


class BackgroundFill(QObject):
    changed = Signal(object)  # the DocumentThread whose fill state changed

    def __init__(self, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._host = host
        self._pass: _Pass | None = None  # the latest; an earlier one's reports are ignored
        host.background.event.connect(self._on_event)
        host.background.ended.connect(self._on_ended)

    @property
    def is_active(self) -> bool:
        return self._pass is not None and self._pass.job.active

    @property
    def is_reading(self) -> bool:
        return self.is_active and self._pass.reading

    def after_answer(self, thread: DocumentThread, settings: RunSettings) -> None:
        """After a question: note a full document the answer left cached, else (re)start the fill
        when a SpecPrefill answer made it worth having."""
        if thread.last_served in FULL_SERVED:  # a full-prefix answer left the whole document cached
            held = thread.session.full_prefix_tokens
            self._set(thread, FillState(FILL_READY, held, held))
        elif thread.had_spec_answer or thread.fill.status == FILL_PAUSED:
            self.start(thread, settings)

    def read_ahead(self, thread: DocumentThread, settings: RunSettings) -> bool:
        """A document opened: the draft reads it ahead once, then the full fill follows."""
        if not settings.read_ahead or thread.read_ahead_started or not self._host.is_ready:
            return False
        thread.read_ahead_started = True
        self._begin(thread, settings, reading=True)
        self._set(thread, FillState(FILL_READING, 0, 0))
        return True

    def start(self, thread: DocumentThread, settings: RunSettings) -> bool:
        if not settings.background_prefill:
            self._set(thread, FillState(FILL_OFF, thread.fill.done, thread.fill.total))
            return False
        if not self._host.is_ready:
            return False
        self._begin(thread, settings, reading=False)
        self._set(thread, FillState(FILL_FILLING, thread.fill.done, thread.fill.total))
        return True

    def cancel(self) -> None:
        """Stop the fill (a document switch, Clear, closing); what it filled is kept by the engine."""
        if self.is_active:
            self._host.background.cancel(self._pass.job)

    def turn_off(self, thread: DocumentThread | None) -> None:
        """Settings turned the fill off: cancel a running one, and say so."""
        self.cancel()
        if thread is not None and thread.fill.status != FILL_READY:
            self._set(thread, FillState(FILL_OFF, thread.fill.done, thread.fill.total))

    def turn_on(self, thread: DocumentThread | None) -> None:
        if thread is not None and thread.fill.status == FILL_OFF:
            status = FILL_PAUSED if thread.fill.done else FILL_IDLE
            self._set(thread, FillState(status, thread.fill.done, thread.fill.total))

    def _begin(self, thread: DocumentThread, settings: RunSettings, *, reading: bool) -> None:
        session = thread.session
        job = self._host.start_background(
            READ_AHEAD_JOB if reading else JOB_NAME,
            lambda engine: background_work(engine, session, settings, read_ahead=reading, fill=not reading),
        )
        self._pass = _Pass(job, thread, settings, reading, thread.fill)

    # --- the background thread's reports, on the GUI thread --------------------------------------------

    def _current(self, job: BackgroundJob) -> _Pass | None:
        """The pass `job` runs, unless a newer one superseded it (a question's fill, another document's)."""
        return self._pass if self._pass is not None and job is self._pass.job else None

    @Slot(object, object)
    def _on_event(self, job: BackgroundJob, event: object) -> None:
        run = self._current(job)
        if run is None:
            return
        if isinstance(event, (ReadAheadProgress, BackgroundProgress)):
            status = FILL_READING if isinstance(event, ReadAheadProgress) else FILL_FILLING
            self._set(run.thread, FillState(status, event.done, event.total))
        elif isinstance(event, (ReadAheadEnded, BackgroundEnded)):
            log.info(
                "%s %s: %d of %d tokens in %.2f s %s",
                job.name,
                event.status,
                event.done,
                event.total,
                event.seconds,
                event.detail,
            )
            run.end = event
            if isinstance(event, BackgroundEnded):
                self._show_end(run.thread, event.status, event.done, event.total, event.detail)

    @Slot(object)
    def _on_ended(self, job: BackgroundJob) -> None:
        run = self._current(job)
        if run is None:
            return
        thread = run.thread
        if run.reading:
            self._set(thread, run.before)
            if run.end is not None and run.end.status in READ_THROUGH:
                self.start(thread, run.settings)
        elif job.error is not None:
            self._set(
                thread,
                FillState(
                    FILL_FAILED, thread.fill.done, thread.fill.total, failure_text(job.error, JOB_NAME)
                ),
            )
        elif thread.fill.status == FILL_FILLING:  # cancelled before it said how it ended, or not needed
            status = "cancelled" if job.cancelled else NOTHING_TO_FILL
            self._show_end(thread, status, thread.fill.done, thread.fill.total, "")

    def _show_end(self, thread: DocumentThread, status: str, done: int, total: int, detail: str) -> None:
        self._set(thread, FillState(ENDED_STATES.get(status, FILL_PAUSED), done, total, detail))

    def _set(self, thread: DocumentThread, state: FillState) -> None:
        thread.fill = state
        self.changed.emit(thread)
