"""Progress of a long engine job (loading the models, calibrating). Modeless: the window stays live."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QProgressDialog, QWidget

# Progress values are bytes or tokens; QProgressBar holds 32-bit ints, so scale to per-mille.
_SCALE = 1000


class JobProgressDialog(QProgressDialog):
    """A progress dialog with a Cancel button; `canceled` fires on Cancel (or closing it), never on `finish`."""

    def __init__(self, title: str, label: str, parent: QWidget | None = None) -> None:
        super().__init__(label, "Cancel", 0, 0, parent)
        self.setWindowTitle(title)
        self.setWindowModality(Qt.WindowModality.NonModal)
        self.setMinimumDuration(0)
        self.setAutoClose(False)
        self.setAutoReset(False)
        self.setMinimumWidth(460)

    def report(self, done: int, total: int, label: str) -> None:
        if label:
            self.setLabelText(label)
        if total > 0:
            self.setRange(0, _SCALE)
            self.setValue(round(_SCALE * min(done, total) / total))
        else:
            self.setRange(0, 0)  # unknown length: busy indicator

    def finish(self) -> None:
        """Close without emitting `canceled` (closing the dialog otherwise counts as Cancel)."""
        self.blockSignals(True)
        self.hide()
        self.deleteLater()


class ModelLoadDialog(JobProgressDialog):
    """While the models are assembled, verified and loaded."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Loading models", "Preparing the models…", parent)
