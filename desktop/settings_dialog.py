"""Settings: model paths, device, threads, context size, look-ahead, chunk size."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtWidgets import (
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

from engine import models
from engine.settings import ModelSettings
from desktop.settings_store import RunPreferences

DEVICES = (("auto", "Auto"), ("cuda", "CUDA"), ("cpu", "CPU"))


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
        self.target = _PathField(f"Default: {models.TARGET.name}", allow_folder=False)
        self.draft = _PathField(f"Default: {models.DRAFT.name} (GGUF file or transformers folder)", allow_folder=True)
        self.device = QComboBox()
        for value, text in DEVICES:
            self.device.addItem(text, value)
        self.threads = _spin(0, 256, special="Auto (physical cores)")
        self.context = _spin(512, 1 << 20, step=1024)
        self.lookahead = _spin(0, 256)
        self.chunk_size = _spin(1, 4096)
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
        form.addRow("Threads:", self.threads)
        form.addRow("Context size (tokens):", self.context)
        form.addRow("Draft look-ahead (tokens):", self.lookahead)
        form.addRow("Chunk size (tokens):", self.chunk_size)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)
        self.resize(640, self.sizeHint().height())
        self.set_values(model_settings, run_prefs)

    def set_values(self, model_settings: ModelSettings, run_prefs: RunPreferences) -> None:
        self.target.set_path(model_settings.target_path)
        self.draft.set_path(model_settings.draft_path)
        self.device.setCurrentIndex(max(self.device.findData(model_settings.device), 0))
        self.threads.setValue(model_settings.n_threads or 0)
        self.context.setValue(model_settings.n_ctx)
        self.lookahead.setValue(run_prefs.lookahead)
        self.chunk_size.setValue(run_prefs.chunk_size)

    def restore_defaults(self) -> None:
        self.set_values(ModelSettings(), RunPreferences())

    def model_settings(self) -> ModelSettings:
        return replace(
            self._base,
            target_path=self.target.path,
            draft_path=self.draft.path,
            device=self.device.currentData(),
            n_threads=self.threads.value() or None,
            n_ctx=self.context.value(),
        )

    def run_preferences(self) -> RunPreferences:
        return RunPreferences(chunk_size=self.chunk_size.value(), lookahead=self.lookahead.value())
