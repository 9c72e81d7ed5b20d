"""The generic worker: events in order on the GUI thread, one terminal signal, prompt cancel."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from PySide6.QtCore import QThread

from desktop.sessions.worker import Worker, make_pool
from engine.core.errors import SpecPrefillError


@pytest.fixture
def pool():
    pool = make_pool(2)
    yield pool
    pool.waitForDone(2000)


def record(worker: Worker) -> dict:
    seen = {"events": [], "threads": set(), "finished": [], "failed": [], "cancelled": 0, "ended": 0}

    def on_event(item):
        seen["events"].append(item)
        seen["threads"].add(QThread.currentThread())

    worker.event.connect(on_event)
    worker.finished.connect(seen["finished"].append)
    worker.failed.connect(seen["failed"].append)
    worker.cancelled.connect(lambda: seen.__setitem__("cancelled", seen["cancelled"] + 1))
    worker.ended.connect(lambda: seen.__setitem__("ended", seen["ended"] + 1))
    return seen


def test_generator_events_arrive_in_order_on_the_gui_thread(qtbot, pool):
    def job(ctx):
        assert threading.current_thread() is not threading.main_thread()
        yield from range(5)
        return "done"

    worker = Worker(job, name="gen")
    seen = record(worker)
    with qtbot.waitSignal(worker.ended, timeout=2000):
        worker.start(pool)
    assert seen["events"] == [0, 1, 2, 3, 4]
    assert seen["threads"] == {QThread.currentThread()}
    assert seen["finished"] == ["done"]
    assert (seen["failed"], seen["cancelled"], seen["ended"]) == ([], 0, 1)
    assert not worker.active


def test_a_plain_callable_reports_its_value_and_can_emit(qtbot, pool):
    def job(ctx):
        ctx.emit("halfway")
        return 42

    worker = Worker(job, name="plain")
    seen = record(worker)
    with qtbot.waitSignal(worker.ended, timeout=2000):
        worker.start(pool)
    assert seen["events"] == ["halfway"]
    assert seen["finished"] == [42]


def test_user_error_arrives_as_the_exception_itself(qtbot, pool, caplog):
    error = SpecPrefillError("the model file is missing")

    def job(ctx):
        raise error

    worker = Worker(job, name="load")
    seen = record(worker)
    with caplog.at_level(logging.WARNING), qtbot.waitSignal(worker.ended, timeout=2000):
        worker.start(pool)
    assert seen["failed"] == [error]  # the object, so the GUI can act on its type
    assert seen["failed"][0].__traceback__ is None  # it no longer holds the job's frames alive
    assert seen["finished"] == []
    assert "the model file is missing" in caplog.text


def test_unexpected_exception_is_logged_with_traceback_and_reported(qtbot, pool, caplog):
    def job(ctx):
        raise ZeroDivisionError("boom")

    worker = Worker(job, name="bad job")
    seen = record(worker)
    with caplog.at_level(logging.ERROR), qtbot.waitSignal(worker.ended, timeout=2000):
        worker.start(pool)
    assert len(seen["failed"]) == 1
    assert isinstance(seen["failed"][0], ZeroDivisionError) and str(seen["failed"][0]) == "boom"
    assert "Traceback" in caplog.text


def test_cancel_stops_a_generator_that_ignores_the_token(qtbot, pool):
    closed = threading.Event()

    def job(ctx):
        try:
            i = 0
            while True:  # never looks at ctx.cancel: the worker must still stop it
                time.sleep(0.005)
                yield i
                i += 1
        finally:
            closed.set()

    worker = Worker(job, name="endless")
    seen = record(worker)
    worker.start(pool)
    qtbot.waitUntil(lambda: len(seen["events"]) >= 3, timeout=2000)
    started = time.monotonic()
    with qtbot.waitSignal(worker.cancelled, timeout=1000):
        worker.cancel()
    assert time.monotonic() - started < 1.0
    assert closed.wait(1.0), "the generator was not closed"
    assert seen["finished"] == [] and seen["failed"] == []
    count = len(seen["events"])
    qtbot.wait(50)
    assert len(seen["events"]) == count, "events kept arriving after cancel"


def test_cancel_before_start_never_runs_the_job(qtbot, pool):
    ran = []
    worker = Worker(lambda ctx: ran.append(1), name="queued")
    seen = record(worker)
    worker.cancel()
    with qtbot.waitSignal(worker.ended, timeout=2000):
        worker.start(pool)
    assert ran == []
    assert seen["cancelled"] == 1


def test_a_worker_can_only_start_once(qtbot, pool):
    worker = Worker(lambda ctx: None, name="once")
    with qtbot.waitSignal(worker.ended, timeout=2000):
        worker.start(pool)
    with pytest.raises(RuntimeError):
        worker.start(pool)
