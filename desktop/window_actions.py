"""The main window's actions, menus and toolbar."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QKeySequence

from desktop.calibrate_action import CALIBRATE_TEXT, CALIBRATE_TIP
from desktop.recent_menu import RecentMenu
from desktop.thread_view import CLEAR_TEXT, CLEAR_TIP

if TYPE_CHECKING:
    from desktop.main_window import MainWindow


@dataclass(frozen=True)
class WindowActions:
    open_file: QAction
    open_folder: QAction
    recent: RecentMenu
    settings: QAction
    choose_models: QAction
    reload: QAction
    calibrate: QAction
    clear_thread: QAction
    about: QAction
    quit: QAction


def build_actions(window: MainWindow) -> WindowActions:
    """The actions, wired to the window's public slots, in the menu bar and the toolbar."""
    actions = WindowActions(
        open_file=QAction("&Open File…", window, shortcut=QKeySequence.StandardKey.Open),
        open_folder=QAction("Open &Folder…", window, shortcut=QKeySequence("Ctrl+Shift+O")),
        recent=RecentMenu(window.store, window),
        settings=QAction("&Settings…", window, shortcut=QKeySequence("Ctrl+,")),
        choose_models=QAction(
            "&Choose Models…", window, statusTip="Pick a target among the GGUF models on this machine"
        ),
        reload=QAction("&Reload Models", window),
        calibrate=QAction(CALIBRATE_TEXT, window, toolTip=CALIBRATE_TIP, statusTip=CALIBRATE_TIP),
        clear_thread=QAction(CLEAR_TEXT, window, toolTip=CLEAR_TIP, statusTip=CLEAR_TIP),
        about=QAction("&About SpecPrefill", window),
        quit=QAction("&Quit", window, shortcut=QKeySequence.StandardKey.Quit),
    )
    actions.open_file.triggered.connect(window.open_file_dialog)
    actions.open_folder.triggered.connect(window.open_folder_dialog)
    actions.recent.pathChosen.connect(window.open_recent)
    actions.settings.triggered.connect(window.open_settings)
    actions.choose_models.triggered.connect(window.open_model_picker)
    actions.reload.triggered.connect(window.load_models)
    actions.calibrate.triggered.connect(window.start_calibration)
    actions.clear_thread.triggered.connect(window.clear_thread)
    actions.about.triggered.connect(window.show_about)
    actions.quit.triggered.connect(window.close)
    _fill_menus(window, actions)
    return actions


def _fill_menus(window: MainWindow, actions: WindowActions) -> None:
    file_menu = window.menuBar().addMenu("&File")
    file_menu.addAction(actions.open_file)
    file_menu.addAction(actions.open_folder)
    file_menu.addMenu(actions.recent)
    file_menu.addSeparator()
    file_menu.addAction(actions.clear_thread)
    file_menu.addSeparator()
    file_menu.addAction(actions.quit)
    models_menu = window.menuBar().addMenu("&Models")
    models_menu.addAction(actions.choose_models)
    models_menu.addAction(actions.settings)
    models_menu.addAction(actions.reload)
    models_menu.addAction(actions.calibrate)
    help_menu = window.menuBar().addMenu("&Help")
    help_menu.addAction(actions.about)
    toolbar = window.addToolBar("Main")
    toolbar.setObjectName("mainToolbar")
    toolbar.setMovable(False)
    for action in (actions.open_file, actions.open_folder, actions.settings):
        toolbar.addAction(action)
