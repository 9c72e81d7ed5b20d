"""The main window's actions, menus and toolbar."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenuBar, QToolBar, QWidget

from desktop.sessions.calibration_session import CALIBRATE_TEXT, CALIBRATE_TIP
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets.recent_menu import RecentMenu
from desktop.widgets.thread_view import CLEAR_TEXT, CLEAR_TIP


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


def build_actions(parent: QWidget, store: SettingsStore) -> WindowActions:
    """The window's actions, owned by `parent`; the window connects each to its slot."""
    return WindowActions(
        open_file=QAction("&Open File…", parent, shortcut=QKeySequence.StandardKey.Open),
        open_folder=QAction("Open &Folder…", parent, shortcut=QKeySequence("Ctrl+Shift+O")),
        recent=RecentMenu(store, parent),
        settings=QAction("&Settings…", parent, shortcut=QKeySequence("Ctrl+,")),
        choose_models=QAction(
            "&Choose Models…", parent, statusTip="Pick a target among the GGUF models on this machine"
        ),
        reload=QAction("&Reload Models", parent),
        calibrate=QAction(CALIBRATE_TEXT, parent, toolTip=CALIBRATE_TIP, statusTip=CALIBRATE_TIP),
        clear_thread=QAction(CLEAR_TEXT, parent, toolTip=CLEAR_TIP, statusTip=CLEAR_TIP),
        about=QAction("&About SpecPrefill", parent),
        quit=QAction("&Quit", parent, shortcut=QKeySequence.StandardKey.Quit),
    )


def fill_menus(menu_bar: QMenuBar, toolbar: QToolBar, actions: WindowActions) -> None:
    """The actions in the menu bar, and the most used ones in the toolbar."""
    file_menu = menu_bar.addMenu("&File")
    file_menu.addAction(actions.open_file)
    file_menu.addAction(actions.open_folder)
    file_menu.addMenu(actions.recent)
    file_menu.addSeparator()
    file_menu.addAction(actions.clear_thread)
    file_menu.addSeparator()
    file_menu.addAction(actions.quit)
    models_menu = menu_bar.addMenu("&Models")
    models_menu.addAction(actions.choose_models)
    models_menu.addAction(actions.settings)
    models_menu.addAction(actions.reload)
    models_menu.addAction(actions.calibrate)
    help_menu = menu_bar.addMenu("&Help")
    help_menu.addAction(actions.about)
    toolbar.setObjectName("mainToolbar")
    toolbar.setMovable(False)
    for action in (actions.open_file, actions.open_folder, actions.settings):
        toolbar.addAction(action)
