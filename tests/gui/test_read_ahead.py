"""The draft's read-ahead when a document opens: progress in the status bar, a question asked at
once takes over without blocking the window, Cancel and a document switch stop it, the setting
turns it off, and the full fill follows a finished read-ahead."""

from __future__ import annotations

import time

from desktop.model.preferences import RunPreferences
from tests.gui.conftest import SPEC_ANSWER, open_and_ask, wait_run_done


def slow_read(engine, chunks: int, chunk_s: float) -> None:
    engine._session_init()  # its records of each read-ahead and fill, from the start
    engine.session_config.read_ahead_chunks = chunks
    engine.session_config.read_ahead_chunk_s = chunk_s


def wait_reading(qtbot, window) -> None:
    qtbot.waitUntil(
        lambda: window.fill_status.text.startswith("Reading ahead: ") and window.thread.fill.done > 0,
        timeout=3000,
    )


def test_opening_a_document_reads_it_ahead_with_progress_then_fills(window, qtbot, engine_factory, long_pdf):
    engine = engine_factory.engine
    slow_read(engine, chunks=10, chunk_s=0.05)
    open_and_ask(window, qtbot, long_pdf, "Summarize this document")
    wait_reading(qtbot, window)
    assert window.fill_status.text.endswith("%") and window.fill_status.bar.isVisible()
    qtbot.waitUntil(lambda: bool(engine.read_ahead_calls), timeout=3000)
    assert engine.read_ahead_calls[-1].status == "done"
    qtbot.waitUntil(lambda: bool(engine.background_calls), timeout=3000)  # the full fill follows
    assert engine.background_calls[-1].status == "done"
    assert [r["mode"] for r in engine.requests] == []  # no question was asked for it


def test_asking_at_once_never_blocks_the_window_and_the_read_ahead_yields(
    window, qtbot, engine_factory, long_pdf
):
    engine = engine_factory.engine
    slow_read(engine, chunks=50, chunk_s=0.1)
    open_and_ask(window, qtbot, long_pdf, "Summarize this document")
    wait_reading(qtbot, window)
    started = time.monotonic()
    window.controls.spec_button.click()
    assert time.monotonic() - started < 0.5  # the click returned: the run is on the engine thread
    assert window.runs.is_active
    qtbot.waitUntil(lambda: bool(engine.read_ahead_calls), timeout=2000)
    assert engine.read_ahead_calls[-1].status == "paused"
    wait_run_done(qtbot, window)
    assert window.spec_pane.answer.toPlainText() == SPEC_ANSWER
    assert not window.fill_status.text.startswith("Reading ahead")


def test_cancel_stops_the_read_ahead_within_a_second(window, qtbot, engine_factory, long_pdf):
    engine = engine_factory.engine
    slow_read(engine, chunks=100, chunk_s=0.1)
    open_and_ask(window, qtbot, long_pdf, "Summarize this document")
    wait_reading(qtbot, window)
    window.cancel()
    qtbot.waitUntil(lambda: bool(engine.read_ahead_calls) and not window.fill.is_active, timeout=1000)
    assert engine.read_ahead_calls[-1].status == "cancelled"
    assert engine.background_calls == []  # a cancelled read-ahead starts no fill
    assert not window.fill_status.text.startswith("Reading ahead")


def test_switching_documents_cancels_the_read_ahead_and_reads_the_new_one(
    window, qtbot, engine_factory, long_pdf, short_txt
):
    engine = engine_factory.engine
    slow_read(engine, chunks=100, chunk_s=0.1)
    open_and_ask(window, qtbot, long_pdf, "Summarize this document")
    wait_reading(qtbot, window)
    first = window.thread
    slow_read(engine, chunks=4, chunk_s=0.02)
    window.open_path(str(short_txt))
    qtbot.waitUntil(lambda: window.thread is not first, timeout=3000)
    qtbot.waitUntil(lambda: len(engine.read_ahead_calls) == 2, timeout=3000)
    assert [call.status for call in engine.read_ahead_calls] == ["cancelled", "done"]


def test_no_read_ahead_when_the_setting_is_off(window, qtbot, engine_factory, long_pdf):
    engine_factory.engine._session_init()
    window.store.save_run_preferences(RunPreferences(read_ahead=False))
    open_and_ask(window, qtbot, long_pdf, "Summarize this document")
    qtbot.wait(200)
    assert engine_factory.engine.read_ahead_calls == []
    assert not window.fill_status.text.startswith("Reading ahead")
