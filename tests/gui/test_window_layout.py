"""The window's size, position and splitters are remembered; the first start fits a small laptop screen."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtWidgets import QSplitter

from desktop.window.layout import FIRST_START_SIZE, first_start_size
from desktop.window.main_window import MainWindow
from tests.gui.conftest import fake_load_document


def new_window(qtbot, qsettings, engine_factory) -> MainWindow:
    window = MainWindow(engine_factory, loader=fake_load_document, settings=qsettings)
    qtbot.addWidget(window)
    return window


def splitter(window: MainWindow, name: str) -> QSplitter:
    return window.findChild(QSplitter, name)


def test_first_start_size_fits_a_1366x768_screen():
    assert first_start_size(None) == FIRST_START_SIZE == QSize(1280, 720)
    assert first_start_size(QRect(0, 0, 2560, 1400)) == QSize(1280, 720)
    laptop = first_start_size(QRect(0, 0, 1366, 728))  # 768 less a 40-pixel panel
    assert laptop.width() <= 1366 and laptop.height() <= 728 * 0.9
    assert first_start_size(QRect(0, 0, 1024, 600)) == QSize(921, 540)


def test_first_start_uses_the_first_start_size(qtbot, qsettings, engine_factory):
    window = new_window(qtbot, qsettings, engine_factory)
    window.restore_layout()
    window.show()
    assert window.width() <= 1280 and window.height() <= 720


SPLITTER_TABS = {
    "mainSplitter": "kept",
    "keptSplitter": "kept",
    "abSplitter": "ab",
}  # the tab that shows each


def sizes_shown(window: MainWindow, qtbot, name: str) -> list[int]:
    """A splitter's sizes once its tab is shown (a hidden splitter has none yet)."""
    window.show_tab(SPLITTER_TABS[name])
    qtbot.waitUntil(lambda: splitter(window, name).sizes()[0] > 0, timeout=1000)
    return splitter(window, name).sizes()


def test_size_and_splitters_are_remembered_across_starts(qtbot, qsettings, engine_factory):
    first = new_window(qtbot, qsettings, engine_factory)
    first.restore_layout()
    first.show()
    first.resize(1100, 680)
    moved = {}
    for name in SPLITTER_TABS:
        total = sum(sizes_shown(first, qtbot, name))
        splitter(first, name).setSizes([total // 4, total - total // 4])
        moved[name] = splitter(first, name).sizes()
    first.close()

    second = new_window(qtbot, qsettings, engine_factory)
    second.restore_layout()
    second.show()
    # The offscreen screen is 800x800: Qt fits a restored width into it, so only the height can tell.
    assert second.height() == 680 and second.store.window_geometry() is not None
    for name, sizes in moved.items():  # the first part keeps its size; the last takes what the width gives
        assert sizes_shown(second, qtbot, name)[0] == sizes[0], name


def test_a_window_that_never_restored_its_layout_does_not_overwrite_it(qtbot, qsettings, engine_factory):
    """Screenshots and tests size the window themselves: closing them keeps the user's layout."""
    window = new_window(qtbot, qsettings, engine_factory)
    window.show()
    window.resize(1400, 900)
    window.close()
    assert window.store.window_geometry() is None
