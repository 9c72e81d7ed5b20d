"""Status bar: model names, whether the runtime restores positions, the draft's memory, where each model runs."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel, QStatusBar

from engine.api import format_bytes, format_count


def positions_text(supported: bool) -> str:
    return "restore positions: supported" if supported else "renumber only"


def target_text(info: Any) -> str:
    """Where the target runs, naming each backend when its layers are split between several:
    "CPU 10 layers + 2 RPC workers 9+9 (CPU, RPC 127.0.0.1:50052, RPC 127.0.0.1:50053)"."""
    backends = tuple(getattr(info, "target_backends", ()))  # infos from before RPC workers have none
    if len(backends) < 2:
        return info.target_device
    return f"{info.target_device} ({', '.join(backends)})"


def devices_text(info: Any) -> str:
    """ "Draft: cuda · Target: GPU (all layers, CUDA) · context 32,768"."""
    return f"Draft: {info.device} · Target: {target_text(info)} · context {format_count(int(info.n_ctx))}"


def target_reason_text(info: Any) -> str:
    """Why the target is not on the GPU (the label's tooltip); "" when it is."""
    reason = info.target_offload_reason
    return f"The target runs on the CPU: {reason}" if reason else ""


class EngineStatus:
    """Permanent labels on the window's status bar, fed from the engine's EngineInfo."""

    def __init__(self, bar: QStatusBar) -> None:
        self.models = QLabel("Models: not loaded")
        self.models.setObjectName("statusModels")
        self.positions = QLabel("")
        self.positions.setObjectName("statusPositions")
        self.memory = QLabel("")
        self.memory.setObjectName("statusMemory")
        self.device = QLabel("")
        self.device.setObjectName("statusDevice")
        for label in (self.models, self.positions, self.memory, self.device):
            bar.addPermanentWidget(label)

    def show_loading(self) -> None:
        self.models.setText("Models: loading…")
        self._clear_details()

    def show_unloaded(self, why: str) -> None:
        self.models.setText(f"Models: {why}")
        self._clear_details()

    def show_info(self, info: Any) -> None:
        self.models.setText(f"Target: {info.target_name}  ·  Draft: {info.draft_name}")
        self.models.setToolTip(f"Target: {info.target_path}\nDraft: {info.draft_path}")
        self.positions.setText(positions_text(bool(info.positions_supported)))
        self.memory.setText(f"Draft memory: {format_bytes(int(info.draft_memory_bytes))}")
        self.device.setText(devices_text(info))
        self.device.setToolTip(target_reason_text(info))

    def _clear_details(self) -> None:
        for label in (self.positions, self.memory, self.device):
            label.setText("")
        self.device.setToolTip("")
