"""Models ▸ Calibrate This Machine…: time the loaded draft and target on the engine thread.

The job is engine.api.calibrate_machine: it reports before each timing, honours Cancel
between timings and inside each, stores the cost model only once every timing finished,
and gives it to the engine, so the window's prediction can use it as soon as the job ends.
It queues on the engine thread like a run, so it never overlaps one.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import Signal

from desktop.sessions.engine_host import EngineLike, JobProgress, progress_events
from desktop.sessions.job_session import EngineJobSession
from desktop.sessions.worker import WorkerContext
from engine.api import ModelSettings, calibrate_machine

log = logging.getLogger(__name__)

CALIBRATE_TEXT = "&Calibrate This Machine…"
CALIBRATE_TIP = (
    "Time the loaded draft and target on this machine (a few minutes), so the window "
    "predicts TTFTs and decides the bypass from this machine's speed"
)
CALIBRATED_NOTICE = (
    "This machine is calibrated: the predicted TTFTs and the automatic bypass now use its timings."
)
CANCELLED_NOTICE = "Calibration cancelled: nothing was saved"


def calibration_job(engine: EngineLike, ctx: WorkerContext, settings: ModelSettings):
    """Runs on the engine thread; its progress reaches the GUI as JobProgress events."""
    return calibrate_machine(engine, settings, progress_events(ctx), ctx.cancel)


class CalibrationSession(EngineJobSession):
    progress = Signal(int, int, str)  # done, total, what is timed now

    def start(self, settings: ModelSettings) -> bool:
        """Calibrate the engine loaded with `settings` (the file records them); refused (False)
        while a calibration runs or without an engine."""
        log.info("calibrating this machine")
        return self._start(
            settings, "calibration", lambda engine, ctx: calibration_job(engine, ctx, settings)
        )

    def _on_event(self, event: object) -> None:
        if isinstance(event, JobProgress):
            self.progress.emit(event.done, event.total, event.label)
