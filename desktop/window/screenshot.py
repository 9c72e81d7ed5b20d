"""Drive the window to a chosen moment (ready, mid-run, or after a compare) and save a PNG.

Used by `specprefill-gui --screenshot`. It only watches the window's sessions and
presses the same buttons a user would; it never touches the engine itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import QApplication

from desktop.window.main_window import MainWindow
from engine.api import TokenGenerated

log = logging.getLogger(__name__)

WHEN_FINISHED, WHEN_RUNNING = "finished", "running"
TOKENS_BEFORE_RUNNING_SHOT = 5  # enough streamed text that the spec pane visibly generates
EXIT_OK, EXIT_UI_ERROR, EXIT_SAVE_FAILED, EXIT_TIMEOUT = 0, 1, 2, 3


@dataclass(frozen=True)
class ShotPlan:
    out: Path
    document: str | None = None
    question: str | None = None
    when: str = WHEN_FINISHED
    tab: str | None = None
    width: int = 1400
    height: int = 900
    timeout_s: float = 1800.0
    about: bool = False  # shoot the Help ▸ About box instead of the window
    answers_out: Path | None = None  # also save the two run panes alone, at the same moment


class ScreenshotDirector(QObject):
    done = Signal(int)  # exit code

    def __init__(self, window: MainWindow, plan: ShotPlan, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.window = window
        self.plan = plan
        self._phase = "prepare"
        self._count_failed = False
        self._poll = QTimer(self)
        self._poll.setInterval(100)
        self._poll.timeout.connect(self._tick)
        self._deadline = QTimer(self)
        self._deadline.setSingleShot(True)
        self._deadline.timeout.connect(self._on_timeout)
        window.documents.tokenCountFailed.connect(self._on_count_failed)
        window.runs.event.connect(self._on_run_event)

    def begin(self) -> None:
        self.window.resize(self.plan.width, self.plan.height)
        self.window.show()
        self.window.start()
        if self.plan.document:
            self.window.open_path(self.plan.document)
        self._deadline.start(int(self.plan.timeout_s * 1000))
        self._poll.start()

    # --- phases --------------------------------------------------------------------------------

    def _tick(self) -> None:
        if self._phase == "prepare" and self._prepared():
            self._after_prepare()
        elif self._phase == "run" and self._run_settled():
            self._shoot()

    def _run_settled(self) -> bool:
        """The run ended, and what is computed from it on workers (agreement, kept-token view) is shown."""
        window = self.window
        return not (
            window.runs.is_active or window.comparison.agreement_pending or window.kept_view.is_preparing
        )

    def _prepared(self) -> bool:
        """Models settled (ready or failed), document settled, and its tokens counted when possible."""
        window = self.window
        if window.host.is_loading or window.documents.is_loading:
            return False
        if window.host.is_ready and window.documents.document is not None:
            return window.documents.tokens is not None or self._count_failed
        return True

    def _after_prepare(self) -> None:
        if not self.plan.question:
            self._shoot()
            return
        self.window.question.set_question(self.plan.question)
        if self.window.start_run("both"):
            self._phase = "run"
        else:
            log.warning("could not start the run for the screenshot; shooting the window as it is")
            self._shoot()

    def _on_run_event(self, event: object) -> None:
        if (
            self._phase == "run"
            and self.plan.when == WHEN_RUNNING
            and isinstance(event, TokenGenerated)
            and event.run == "spec"
            and event.index + 1 >= TOKENS_BEFORE_RUNNING_SHOT
        ):
            self._shoot()
            self.window.cancel()  # the shot is taken; no need to finish the run

    def _on_count_failed(self, _error: Exception) -> None:
        self._count_failed = True

    def _on_timeout(self) -> None:
        log.error("screenshot timed out after %.0f s; saving the window as it is", self.plan.timeout_s)
        self._shoot(EXIT_TIMEOUT)

    # --- the shot --------------------------------------------------------------------------------

    def _shoot(self, code: int | None = None) -> None:
        if self._phase == "shot":
            return
        self._phase = "shot"
        self._poll.stop()
        self._deadline.stop()
        if self.plan.tab:
            self.window.show_tab(self.plan.tab)
        QApplication.processEvents()  # let layouts and the last updates paint
        saved = self._grab().save(str(self.plan.out), "PNG") and self._save_answers()
        if not saved:
            log.error(
                "could not write %s",
                self.plan.out
                if self.plan.answers_out is None
                else f"{self.plan.out} or {self.plan.answers_out}",
            )
            code = EXIT_SAVE_FAILED
        elif code is None:
            code = EXIT_UI_ERROR if self.window.banner.kind == "error" else EXIT_OK
        log.info("screenshot %s (exit %d)", self.plan.out, code)
        self.done.emit(code)

    def _save_answers(self) -> bool:
        out = self.plan.answers_out
        return out is None or self.window.pane_area.grab().save(str(out), "PNG")

    def _grab(self) -> QPixmap:
        if not self.plan.about:
            return self.window.grab()
        box = self.window.show_about()
        QApplication.processEvents()  # lay the box out before grabbing it
        return box.grab()
