"""Keep slider, position mode, the run buttons (Ask, Compare, one run only) and Cancel.

The keep default and the position modes come from the settings schema (engine.api).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QStandardItemModel
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider, QWidget

from desktop.model.preferences import KEEP_DEFAULT, KEEP_MAX, KEEP_MIN
from engine.api import (
    AUTO_KEEP,
    AUTO_KEEP_BROAD,
    AUTO_KEEP_FLOOR,
    AUTO_KEEP_JOINED,
    AUTO_LONG_LOOKUP_TOKENS,
    GAPPED_POSITIONS,
    RunSettings,
    option_of,
)

POSITIONS = option_of(RunSettings, "positions")


class RunControls(QWidget):
    runRequested = Signal(str)  # "auto" | "both" | "baseline" | "spec"
    cancelRequested = Signal()
    keepChanged = Signal(int)
    keepAutoChanged = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.keep_slider = QSlider(Qt.Orientation.Horizontal)
        self.keep_slider.setObjectName("keepSlider")
        self.keep_slider.setRange(KEEP_MIN, KEEP_MAX)
        self.keep_slider.setValue(KEEP_DEFAULT)
        self.keep_slider.setMinimumWidth(160)
        self.keep_slider.setToolTip("Share of the prompt's tokens SpecPrefill keeps")
        self.keep_label = QLabel()
        self.keep_label.setMinimumWidth(36)
        self.keep_slider.valueChanged.connect(self._on_keep)
        self.keep_auto = QCheckBox("Auto")
        self.keep_auto.setObjectName("keepAuto")
        self.keep_auto.setToolTip(
            "Let the draft's scores choose the keep for each question: less where the "
            "relevant text is concentrated, more where it is spread out; a summary or "
            f"another whole-document question keeps {AUTO_KEEP_BROAD:.0%}, which coverage "
            "spreads over every part; a question that joins two facts keeps "
            f"{AUTO_KEEP_JOINED:.0%}; a look-up in a document of "
            f"{AUTO_LONG_LOOKUP_TOKENS:,}+ tokens that fits the target's window keeps "
            f"{AUTO_KEEP_FLOOR:.0%}"
        )
        self.keep_auto.toggled.connect(self._on_keep_auto)
        self.positions = QComboBox()
        self.positions.setObjectName("positionMode")
        for mode in POSITIONS.choices:
            self.positions.addItem(mode, mode)
        self.positions.setCurrentIndex(self.positions.findData(RunSettings.positions))
        self.positions.setToolTip(POSITIONS.help)
        self.ask_button = QPushButton("Ask")
        self.ask_button.setObjectName("askButton")
        self.compare_button = QPushButton("Compare")
        self.compare_button.setObjectName("compareButton")
        self.baseline_button = QPushButton("Full prefill only")
        self.spec_button = QPushButton("SpecPrefill only")
        self._tips = {
            self.ask_button: "One answer, the fastest way: SpecPrefill first, follow-ups from the full cached document",
            self.compare_button: "Run SpecPrefill (the fast answer shows first), then full prefill, and compare them",
            self.baseline_button: "Prefill the whole prompt into the target (the baseline)",
            self.spec_button: "Let the draft pick the tokens that matter; prefill only those",
        }
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the run or the loading in progress (Esc)")
        self.cancel_button.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.cancel_button.setEnabled(False)
        self.ask_button.clicked.connect(lambda: self.runRequested.emit("auto"))
        self.compare_button.clicked.connect(lambda: self.runRequested.emit("both"))
        self.baseline_button.clicked.connect(lambda: self.runRequested.emit("baseline"))
        self.spec_button.clicked.connect(lambda: self.runRequested.emit("spec"))
        self.cancel_button.clicked.connect(self.cancelRequested)
        self._build_layout()
        self._on_keep(self.keep_slider.value())
        self.set_state(can_run=False, cancellable=False, reason="Open a document first")

    def _build_layout(self) -> None:
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Keep:"))
        layout.addWidget(self.keep_slider)
        layout.addWidget(self.keep_label)
        layout.addWidget(self.keep_auto)
        layout.addSpacing(12)
        layout.addWidget(QLabel("Positions:"))
        layout.addWidget(self.positions)
        layout.addStretch(1)
        for button in self.run_buttons:
            layout.addWidget(button)
        layout.addWidget(self.cancel_button)

    @property
    def run_buttons(self) -> tuple[QPushButton, ...]:
        return (self.ask_button, self.compare_button, self.baseline_button, self.spec_button)

    @property
    def keep_percent(self) -> int:
        return self.keep_slider.value()

    @property
    def keep(self) -> float | str:
        """The keep the next run asks for: the slider's fraction, or auto."""
        return AUTO_KEEP if self.keep_auto.isChecked() else self.keep_slider.value() / 100.0

    def set_keep_auto(self, auto: bool) -> None:
        self.keep_auto.setChecked(auto)

    @property
    def position_mode(self) -> str:
        return self.positions.currentData()

    def set_keep_percent(self, percent: int) -> None:
        self.keep_slider.setValue(percent)

    def set_position_mode(self, mode: str) -> None:
        index = self.positions.findData(mode)
        if index >= 0 and self._item_enabled(index):
            self.positions.setCurrentIndex(index)

    def set_restore_supported(self, supported: bool) -> None:
        """Grey out "restore" and "compress" where the runtime cannot place tokens at gapped
        positions; a greyed-out choice that was selected falls back to auto."""
        for mode in GAPPED_POSITIONS:  # placements some llama.cpp builds reject
            index = self.positions.findData(mode)
            if index < 0:  # not among the schema's choices
                continue
            self._model().item(index).setEnabled(supported)
            if not supported and self.positions.currentIndex() == index:
                self.positions.setCurrentIndex(self.positions.findData("auto"))

    def set_state(self, *, can_run: bool, cancellable: bool, reason: str = "") -> None:
        for button in self.run_buttons:
            button.setEnabled(can_run)
            button.setToolTip(self._tips[button] if can_run else reason)  # say why it is greyed out
        self.cancel_button.setEnabled(cancellable)

    def _on_keep(self, value: int) -> None:
        self.keep_label.setText(f"{value}%")
        self.keepChanged.emit(value)

    def _on_keep_auto(self, auto: bool) -> None:
        self.keep_slider.setEnabled(not auto)  # auto chooses per question: the slider's value waits
        self.keep_label.setEnabled(not auto)
        self.keepAutoChanged.emit(auto)

    def _model(self) -> QStandardItemModel:
        return self.positions.model()

    def _item_enabled(self, index: int) -> bool:
        return self._model().item(index).isEnabled()
