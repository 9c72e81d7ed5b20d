"""Peak memory of a stretch of work: process RSS sampled on a thread, or CUDA's own counter."""

from __future__ import annotations

import threading

import psutil
import torch


class PeakMemory:
    """Context manager: `peak_bytes` is the extra memory the block used at its peak.

    On CUDA it is torch's max allocated bytes on the device; on CPU it is the peak process
    RSS above the RSS at entry, sampled every `interval` seconds.
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
        self._base = psutil.Process().memory_info().rss
        self._peak = self._base
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        process = psutil.Process()
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, process.memory_info().rss)

    def __exit__(self, *exc) -> bool:
        if self.device.type == "cuda":
            self.peak_bytes = int(torch.cuda.max_memory_allocated(self.device))
            return False
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, psutil.Process().memory_info().rss)
        self.peak_bytes = self._peak - self._base
        return False
