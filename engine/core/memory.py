"""Will a load or a run fit in memory? Estimate it, compare with what is free, refuse with the numbers.

Only the big allocations are counted, so an estimate is a floor: a refusal means the work
could not fit, instead of the process being killed half-way. The target's needs are
estimated in engine.llama.memory, the draft's in engine.draft.memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from engine.core.errors import InsufficientMemoryError
from engine.core.formatting import format_bytes


@dataclass(frozen=True)
class KvShape:
    n_layers: int
    n_kv_heads: int
    head_dim: int
    bytes_per_value: int

    def bytes_for(self, n_tokens: int) -> int:
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * self.bytes_per_value * n_tokens


@dataclass(frozen=True)
class MemoryNeed:
    """What one step needs, part by part: ((label, bytes), ...)."""

    what: str
    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(n for _, n in self.parts)

    def breakdown(self) -> str:
        return " + ".join(f"{label} {format_bytes(n)}" for label, n in self.parts)


def available_bytes(device: str) -> int:
    """Memory free for new allocations: the device's on CUDA, the system's otherwise."""
    if device.startswith("cuda"):
        import torch  # lazy: only a CUDA device needs torch here, and core stays light

        return int(torch.cuda.mem_get_info(device)[0])
    return int(psutil.virtual_memory().available)


def require_fits(need: MemoryNeed, device: str) -> None:
    free = available_bytes(device)
    if need.total > free:
        raise InsufficientMemoryError(
            f"{need.what} needs about {format_bytes(need.total)} ({need.breakdown()}), "
            f"but only {format_bytes(free)} is available; close other programs, "
            "lower the context size or use a shorter document")
