"""The active document's thread: clearing it with its caches, and its background full prefill."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.doc_threads import DocumentThread
from desktop.error_banner import failure_text

if TYPE_CHECKING:
    from desktop.main_window import MainWindow


class ThreadFlow:
    def __init__(self, window: MainWindow) -> None:
        self._window = window
        window.fill.changed.connect(self._on_fill_changed)

    def clear(self) -> bool:
        """One action: empty the document's thread and drop its caches (saved state on disk included)."""
        window = self._window
        thread = window.thread
        if thread is None or not window.enablement().clear_thread:
            return False
        window.fill.cancel()
        thread.clear()
        window.thread_view.refresh()
        window.fill_status.show_state(thread.fill)
        window.compare_caption.hide()
        if window.host.is_ready:
            session = thread.session
            worker = window.host.submit(
                "clearing the document's caches", lambda engine, ctx: engine.forget(session, saved=True)
            )
            worker.failed.connect(
                lambda error: window.banner.show_error(
                    f"Could not clear the caches: {failure_text(error, 'clearing the caches')}"
                )
            )
        window.statusBar().showMessage(f"Cleared the thread and caches of {thread.name}", 5000)
        return True

    def resume_fill(self) -> None:
        """Idle again: fill the active document in the background if a SpecPrefill answer made it
        worth it, or resume a paused fill (the engine goes on from where it stopped)."""
        window = self._window
        if not window.enablement().resume_fill:
            return
        window.fill.after_answer(window.thread, window.run_settings())

    def apply_background_setting(self, on: bool) -> None:
        """Settings ▸ Background full prefill: off cancels a running fill; on may start one now."""
        window = self._window
        if not on:
            window.fill.turn_off(window.thread)
            return
        window.fill.turn_on(window.thread)
        self.resume_fill()

    def _on_fill_changed(self, thread: DocumentThread) -> None:
        if thread is self._window.thread:
            self._window.fill_status.show_state(thread.fill)
