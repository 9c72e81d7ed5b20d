"""Closing the window while an engine job runs: the engine is freed only once the job has returned."""

from __future__ import annotations

import threading

from tests.gui.conftest import fake_load_document

NATIVE_CALL_S = 3.5  # longer than the 3 s the host used to wait before freeing the engine anyway


def test_closing_during_a_native_call_frees_the_engine_only_after_it_returns(
    make_window, qtbot, engine_factory, long_pdf
):
    window = make_window()
    engine = engine_factory.engine
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def tokenize_like_a_30_mb_file(text: str) -> int:  # native work: deaf to Cancel until it returns
        started.set()
        release.wait(30)
        order.append("job returned")
        return len(text)

    engine.count_tokens = tokenize_like_a_30_mb_file
    engine.close = lambda: order.append("engine closed")
    window.open_path(str(long_pdf))
    qtbot.waitUntil(started.is_set, timeout=5000)
    timer = threading.Timer(NATIVE_CALL_S, release.set)
    timer.start()
    try:
        window.close()
        qtbot.waitUntil(lambda: "engine closed" in order, timeout=int(NATIVE_CALL_S * 1000) + 5000)
        assert order == ["job returned", "engine closed"]
        assert not window.isVisible()
    finally:
        release.set()
        timer.cancel()


def test_closing_an_idle_window_frees_the_engine_at_once(window, engine_factory):
    engine = engine_factory.engine
    window.close()
    assert engine.closed
    assert not window.isVisible()


def test_a_load_still_running_at_close_is_freed_too(make_window, qtbot, engine_factory, fake_config):
    fake_config.load_steps, fake_config.load_step_s = 50, 0.02
    window = make_window(wait_ready=False, loader=fake_load_document)
    qtbot.waitUntil(lambda: window.host.is_loading, timeout=1000)
    window.close()
    assert not window.host.is_loading
    assert all(engine.closed for engine in engine_factory.built)
