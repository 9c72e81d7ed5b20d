"""BackgroundThread, the one driver of the engine's background work (chat, serve, the app), and
background_work, the read-ahead then the full fill."""

import logging
import threading
import time

from engine.api import BackgroundThread, CancelToken, RunSettings, background_work


def test_events_reach_on_event_in_order_on_the_thread():
    seen, threads = [], []

    def on_event(event):
        seen.append(event)
        threads.append(threading.current_thread().name)

    driver = BackgroundThread(on_event, name="fill-test")
    driver.start(lambda cancel: iter([1, 2, 3]))
    assert driver.wait(5)
    assert seen == [1, 2, 3]
    assert set(threads) == {"fill-test"}
    assert not driver.running


def test_stop_cancels_the_work_under_way_and_waits_for_it():
    started = threading.Event()

    def work(cancel: CancelToken):
        started.set()
        while not cancel.cancelled:
            yield "batch"
            time.sleep(0.01)
        yield "cancelled"

    events = []
    driver = BackgroundThread(events.append)
    driver.start(work)
    assert started.wait(5)
    assert driver.running
    assert driver.stop(5)
    assert not driver.running
    assert events[-1] == "cancelled"


def test_start_waits_for_the_previous_work_and_gives_each_its_own_token():
    release = threading.Event()
    tokens, order = [], []

    def first(cancel):
        tokens.append(cancel)
        release.wait(5)
        order.append("first")
        yield "first"

    def second(cancel):
        tokens.append(cancel)
        order.append("second")
        yield "second"

    driver = BackgroundThread()
    driver.start(first)
    threading.Timer(0.05, release.set).start()
    driver.start(second)  # blocks until the first has ended
    assert driver.wait(5)
    assert order == ["first", "second"]
    assert tokens[0] is not tokens[1]


def test_a_failure_is_logged_not_raised(caplog):
    def broken(cancel):
        yield "one"
        raise RuntimeError("the fill broke")

    events = []
    driver = BackgroundThread(events.append)
    with caplog.at_level(logging.ERROR):
        driver.start(broken)
        assert driver.wait(5)
    assert events == ["one"]
    assert "the background work failed" in caplog.text
    driver.start(lambda cancel: iter(["again"]))  # the driver still works after a failure
    assert driver.wait(5)
    assert events == ["one", "again"]


def test_wait_times_out_while_the_work_runs():
    gate = threading.Event()
    driver = BackgroundThread()
    driver.start(lambda cancel: iter([gate.wait(5)]))
    assert driver.wait(0.05) is False
    gate.set()
    assert driver.wait(5)


class FakeEngine:
    def __init__(self, needed: bool):
        self.needed = needed
        self.calls = []

    def read_ahead(self, session, settings, cancel):
        self.calls.append("read")
        yield "read-ended"

    def background_needed(self, session, settings):
        return self.needed

    def background_prefill(self, session, settings, cancel):
        self.calls.append("fill")
        yield "fill-ended"


def test_background_work_reads_ahead_then_fills():
    engine = FakeEngine(needed=True)
    work = background_work(engine, "session", RunSettings(), read_ahead=True, fill=True)
    assert list(work(CancelToken())) == ["read-ended", "fill-ended"]
    assert engine.calls == ["read", "fill"]


def test_background_work_skips_what_is_not_asked_for_or_not_needed():
    engine = FakeEngine(needed=False)
    assert list(background_work(engine, "s", RunSettings(), read_ahead=True, fill=True)(CancelToken())) == [
        "read-ended"
    ]
    engine = FakeEngine(needed=True)
    off = RunSettings(read_ahead=False)
    assert list(background_work(engine, "s", off, read_ahead=True, fill=False)(CancelToken())) == []
    cancelled = CancelToken()
    cancelled.cancel()
    assert list(background_work(engine, "s", RunSettings(), read_ahead=False, fill=True)(cancelled)) == []
