"""The active document's thread: clearing it with its caches, and its background full prefill."""

from __future__ import annotations

from desktop.model.doc_threads import DocumentThread
from desktop.model.failure_text import failure_text
from desktop.window.parts import WindowHooks, WindowSessions, WindowViews


class ThreadFlow:
    def __init__(self, views: WindowViews, sessions: WindowSessions, hooks: WindowHooks) -> None:
        self._views, self._sessions, self._hooks = views, sessions, hooks
        sessions.fill.changed.connect(self._on_fill_changed)

    def clear(self) -> bool:
        """One action: empty the document's thread and drop its caches (saved state on disk included)."""
        views, sessions = self._views, self._sessions
        thread = sessions.threads.active
        if thread is None or not self._hooks.enablement().clear_thread:
            return False
        sessions.fill.cancel()
        thread.clear()
        views.thread_view.refresh()
        views.fill_status.show_state(thread.fill)
        views.compare_caption.hide()
        if sessions.host.is_ready:
            session = thread.session
            worker = sessions.host.submit(
                "clearing the document's caches", lambda engine, ctx: engine.forget(session, saved=True)
            )
            worker.failed.connect(
                lambda error: views.banner.show_error(
                    f"Could not clear the caches: {failure_text(error, 'clearing the caches')}"
                )
            )
        views.status_bar.showMessage(f"Cleared the thread and caches of {thread.name}", 5000)
        return True

    def resume_fill(self) -> None:
        """Idle again: fill the active document in the background if a SpecPrefill answer made it
        worth it, or resume a paused fill (the engine goes on from where it stopped)."""
        if not self._hooks.enablement().resume_fill:
            return
        self._sessions.fill.after_answer(self._sessions.threads.active, self._hooks.run_settings())

    def apply_background_setting(self, on: bool) -> None:
        """Settings ▸ Background full prefill: off cancels a running fill; on may start one now."""
        fill, thread = self._sessions.fill, self._sessions.threads.active
        if not on:
            fill.turn_off(thread)
            return
        fill.turn_on(thread)
        self.resume_fill()

    def _on_fill_changed(self, thread: DocumentThread) -> None:
        if thread is self._sessions.threads.active:
            self._views.fill_status.show_state(thread.fill)
