"""Settings: model paths, device, draft precision, threads, context size, and the run preferences."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.api import DEFAULT_DRAFT, DEFAULT_MIN_TOKENS, DEFAULT_TARGET, ModelSettings
from desktop.settings_store import RunPreferences

DEVICES = (("auto", "Auto"), ("cuda", "CUDA"), ("cpu", "CPU"))
DRAFT_PRECISIONS = (("int8", "int8 (dynamic quantization, faster on CPU)"), ("none", "fp32"))
MAX_THRESHOLD = 1 << 20


class _PathField(QWidget):
    """A path line edit with Browse buttons; empty means the default model."""

    def __init__(self, placeholder: str, allow_folder: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText(placeholder)
        self.edit.setToolTip(placeholder)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        file_button = QPushButton("File…")
        file_button.clicked.connect(self._browse_file)
        layout.addWidget(file_button)
        if allow_folder:
            folder_button = QPushButton("Folder…")
            folder_button.clicked.connect(self._browse_folder)
            layout.addWidget(folder_button)

    @property
    def path(self) -> Path | None:
        text = self.edit.text().strip()
        return Path(text).expanduser() if text else None

    def set_path(self, path: Path | None) -> None:
        self.edit.setText(str(path) if path else "")

    def _browse_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a model", self.edit.text(), "GGUF models (*.gguf);;All files (*)")
        if path:
            self.edit.setText(path)

    def _browse_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose a transformers model folder", self.edit.text())
        if path:
            self.edit.setText(path)


class _ThresholdField(QWidget):
    """The SpecPrefill threshold: automatic (None) or a token count typed by the user."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.automatic = QCheckBox(f"automatic (calibrated prediction, else {DEFAULT_MIN_TOKENS})")
        self.automatic.setToolTip("Bypass SpecPrefill where this machine's calibration predicts no gain; "
                                  f"without a calibration, below {DEFAULT_MIN_TOKENS} tokens")
        self.tokens = _spin(0, MAX_THRESHOLD, step=256)
        self.tokens.setSuffix(" tokens")
        self.tokens.setToolTip("Prompts shorter than this run full prefill instead of SpecPrefill")
        self.automatic.toggled.connect(lambda on: self.tokens.setEnabled(not on))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.automatic)
        layout.addWidget(self.tokens, 1)

    @property
    def value(self) -> int | None:
        return None if self.automatic.isChecked() else self.tokens.value()

    def set_value(self, min_tokens: int | None) -> None:
        self.automatic.setChecked(min_tokens is None)
        self.tokens.setEnabled(min_tokens is not None)
        # Unchecking "automatic" starts from the engine's fixed threshold, not from 0.
        self.tokens.setValue(DEFAULT_MIN_TOKENS if min_tokens is None else min_tokens)


def _spin(low: int, high: int, step: int = 1, special: str | None = None) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setSingleStep(step)
    if special:
        spin.setSpecialValueText(special)  # shown at the minimum value
    return spin


class SettingsDialog(QDialog):
    def __init__(self, model_settings: ModelSettings, run_prefs: RunPreferences, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._base = model_settings  # fields the dialog does not edit (n_batch) are kept from here
        self.target = _PathField(f"Default: {DEFAULT_TARGET.name}", allow_folder=False)
        self.draft = _PathField(f"Default: {DEFAULT_DRAFT.name} (GGUF file or transformers folder)", allow_folder=True)
        self.device = QComboBox()
        for value, text in DEVICES:
            self.device.addItem(text, value)
        self.draft_precision = QComboBox()
        for value, text in DRAFT_PRECISIONS:
            self.draft_precision.addItem(text, value)
        self.threads = _spin(0, 256, special="Auto (physical cores)")
        self.context = _spin(512, 1 << 20, step=1024)
        self.lookahead = _spin(0, 256)
        self.draft_window = _spin(0, 1 << 20, step=1024, special="Full attention")
        self.draft_window.setToolTip("In the draft's prefill, each prompt token attends to the first tokens and "
                                     "this many recent ones: faster on long documents, scores barely change")
        self.chunk_size = _spin(1, 4096)
        self.threshold = _ThresholdField()
        self.max_new_tokens = _spin(1, 32768, step=64)
        self.truncate = QCheckBox("cut the end of a document too long for the context (instead of refusing)")
        self.truncate.setToolTip("The run then says how many tokens were cut; the question is always kept")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.restore_button = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        self.restore_button.clicked.connect(self.restore_defaults)
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)

        form = QFormLayout()
        form.addRow("Target model:", self.target)
        form.addRow("Draft model:", self.draft)
        form.addRow("Device:", self.device)
        form.addRow("Draft precision:", self.draft_precision)
        form.addRow("Threads:", self.threads)
        form.addRow("Context size (tokens):", self.context)
        form.addRow("Draft look-ahead (tokens):", self.lookahead)
        form.addRow("Draft attention window (tokens):", self.draft_window)
        form.addRow("Chunk size (tokens):", self.chunk_size)
        form.addRow("SpecPrefill threshold:", self.threshold)
        form.addRow("Max new tokens:", self.max_new_tokens)
        form.addRow("Long documents:", self.truncate)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)
        self.resize(640, self.sizeHint().height())
        self.set_values(model_settings, run_prefs)

    def set_values(self, model_settings: ModelSettings, run_prefs: RunPreferences) -> None:
        self.target.set_path(model_settings.target_path)
        self.draft.set_path(model_settings.draft_path)
        self.device.setCurrentIndex(max(self.device.findData(model_settings.device), 0))
        self.draft_precision.setCurrentIndex(max(self.draft_precision.findData(model_settings.draft_quant), 0))
        self.threads.setValue(model_settings.n_threads or 0)
        self.context.setValue(model_settings.n_ctx)
        self.lookahead.setValue(run_prefs.lookahead)
        self.draft_window.setValue(run_prefs.draft_window)
        self.chunk_size.setValue(run_prefs.chunk_size)
        self.threshold.set_value(run_prefs.min_tokens)
        self.max_new_tokens.setValue(run_prefs.max_new_tokens)
        self.truncate.setChecked(run_prefs.truncate)

    def restore_defaults(self) -> None:
        self.set_values(ModelSettings(), RunPreferences())

    def model_settings(self) -> ModelSettings:
        return replace(
            self._base,
            target_path=self.target.path,
            draft_path=self.draft.path,
            device=self.device.currentData(),
            draft_quant=self.draft_precision.currentData(),
            n_threads=self.threads.value() or None,
            n_ctx=self.context.value(),
        )

    def run_preferences(self) -> RunPreferences:
        return RunPreferences(
            chunk_size=self.chunk_size.value(),
            lookahead=self.lookahead.value(),
            draft_window=self.draft_window.value(),
            max_new_tokens=self.max_new_tokens.value(),
            min_tokens=self.threshold.value,
            truncate=self.truncate.isChecked(),
        )
