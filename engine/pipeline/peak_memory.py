"""Peak memory of a stretch of work: CUDA's own counter, or a reading sampled on a thread
(the MPS allocator's bytes on Apple GPUs, the process RSS on the CPU)."""

from __future__ import annotations

import threading

import psutil
import torch


def held_bytes(device: torch.device) -> int:
    """What is held now: on CUDA and MPS the bytes torch allocated on the device; on the CPU the process's RSS."""
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    if device.type == "mps":
        return int(torch.mps.current_allocated_memory())
    return psutil.Process().memory_info().rss


class PeakMemory:
    """Context manager: `peak_bytes` is the extra memory the block used at its peak.

    On CUDA it is torch's max allocated bytes on the device (what was allocated before counts
    too); elsewhere it is the peak of `held_bytes` above its value at entry, sampled every
    `interval` seconds (MPS keeps no peak of its own).
    """

    def __init__(self, device: str = "cpu", interval: float = 0.02):
        self.device = torch.device(device)
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            return self
        self._base = held_bytes(self.device)
        self._peak = self._base
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, held_bytes(self.device))

    def __exit__(self, *exc) -> bool:
        if self.device.type == "cuda":
            self.peak_bytes = int(torch.cuda.max_memory_allocated(self.device))
            return False
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, held_bytes(self.device))
        self.peak_bytes = self._peak - self._base
        return False
