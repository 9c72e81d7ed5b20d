"""The main window's layout: its tabs, its splitter, and the size and splitter positions it remembers."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QTabWidget, QVBoxLayout, QWidget

from desktop.sessions.settings_store import SettingsStore
from desktop.window.parts import WindowViews

TAB_KEPT, TAB_ANSWERS, TAB_AB, TAB_THREAD = "kept", "answers", "ab", "thread"
TAB_ORDER = (TAB_KEPT, TAB_ANSWERS, TAB_AB, TAB_THREAD)  # left to right
TAB_ALIASES = {
    "kept": TAB_KEPT,
    "heatmap": TAB_KEPT,
    "answers": TAB_ANSWERS,
    "diff": TAB_ANSWERS,
    "ab": TAB_AB,
    "thread": TAB_THREAD,
}

FIRST_START_SIZE = QSize(1280, 720)  # fits a 1366x768 laptop screen with its panels
SCREEN_SHARE = 0.9  # or this share of a smaller screen's free area
# The lower tabs may shrink below their contents' minimum (they clip; the splitter gives the room
# back), else the A/B tab alone keeps the window taller than a 768-pixel screen.
TABS_MIN_HEIGHT = 130


def first_start_size(available: QRect | None) -> QSize:
    """The window's size before any was remembered: 1280x720, or 90% of a smaller screen."""
    if available is None or available.isEmpty():
        return FIRST_START_SIZE
    fit = QSize(int(available.width() * SCREEN_SHARE), int(available.height() * SCREEN_SHARE))
    return FIRST_START_SIZE.boundedTo(fit)


def build_tabs(kept_view: QWidget, answers: QWidget, ab_tab: QWidget, thread_view: QWidget) -> QTabWidget:
    """The lower views' tabs, in TAB_ORDER."""
    tabs = QTabWidget()
    tabs.addTab(kept_view, "Kept tokens")
    tabs.addTab(answers, "Answers")
    tabs.addTab(ab_tab, "A/B test")
    tabs.addTab(thread_view, "Thread")
    tabs.setMinimumHeight(TABS_MIN_HEIGHT)
    return tabs


def tab_widget(tabs: QTabWidget, name: str) -> QWidget:
    """The tab called `name` or one of its aliases (the app's --tab choices)."""
    return tabs.widget(TAB_ORDER.index(TAB_ALIASES[name]))


def build_layout(views: WindowViews, tabs: QTabWidget) -> tuple[QWidget, QWidget]:
    """Lays out the window's widgets: its central widget, and the pane area in it (both runs and
    their comparison)."""
    panes = QWidget()
    pane_row = QHBoxLayout()
    pane_row.addWidget(views.panes["baseline"])
    pane_row.addWidget(views.panes["spec"])
    pane_column = QVBoxLayout(panes)
    pane_column.setContentsMargins(0, 0, 0, 0)
    pane_column.addWidget(views.compare_caption)
    pane_column.addLayout(pane_row, 1)
    pane_column.addWidget(views.comparison)

    splitter = QSplitter(Qt.Orientation.Vertical)
    splitter.setObjectName("mainSplitter")  # the window remembers its position by this name
    splitter.addWidget(panes)
    splitter.addWidget(tabs)
    splitter.setStretchFactor(0, 1)
    splitter.setStretchFactor(1, 1)
    splitter.setSizes([380, 360])  # the kept-token view deserves as much room as the answers

    central = QWidget()
    layout = QVBoxLayout(central)
    layout.addWidget(views.banner)
    layout.addWidget(views.doc_info)
    layout.addWidget(views.question)
    layout.addWidget(views.controls)
    layout.addWidget(splitter, 1)
    return central, panes


class LayoutMemory:
    """The window's geometry and named splitters, restored at start and saved at close."""

    def __init__(self, window: QWidget, store: SettingsStore) -> None:
        self._window = window
        self._store = store
        self.enabled = False  # on once restore ran: screenshots and tests leave QSettings alone

    def restore(self) -> None:
        window = self._window
        geometry = self._store.window_geometry()
        if geometry is None or not window.restoreGeometry(geometry):
            screen = window.screen()
            window.resize(first_start_size(screen.availableGeometry() if screen else None))
        for splitter in self._named_splitters():
            state = self._store.splitter_state(splitter.objectName())
            if state is not None:
                splitter.restoreState(state)
        self.enabled = True

    def save(self) -> None:
        if not self.enabled:
            return
        splitters = {splitter.objectName(): splitter.saveState() for splitter in self._named_splitters()}
        self._store.save_layout(self._window.saveGeometry(), splitters)

    def _named_splitters(self) -> list[QSplitter]:
        return [splitter for splitter in self._window.findChildren(QSplitter) if splitter.objectName()]
