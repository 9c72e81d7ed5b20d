"""Will a load or a run fit in memory? Estimate it, compare with what is free, refuse with the numbers.

Only the big allocations are counted, so an estimate is a floor: a refusal means the work
could not fit, instead of the process being killed half-way. Each part counts on the device
that holds it (a GPU's own memory, or RAM), and each device is checked against its own free memory. The target's needs are
estimated in engine.llama.memory, the draft's in engine.draft.memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def needs_by_device(what: str, placed: Iterable[tuple[str, str, int]]) -> dict[str, MemoryNeed]:
    """(device, label, bytes) parts as one need per device: each device is checked against its own memory."""
    parts: dict[str, list[tuple[str, int]]] = {}
    for device, label, n in placed:
        parts.setdefault(device, []).append((label, n))
    return {device: MemoryNeed(what, tuple(device_parts)) for device, device_parts in parts.items()}


def available_bytes(device: str) -> int:
    """Memory free for new allocations on `device`: CUDA's own, MPS's share of the unified memory,
    the system's otherwise."""
    if device.startswith("cuda"):
        import torch  # lazy: only a GPU device needs torch here, and core stays light

        return int(torch.cuda.mem_get_info(device)[0])
    ram = int(psutil.virtual_memory().available)
    return min(ram, _mps_headroom(ram)) if device.startswith("mps") else ram


def _mps_headroom(ram: int) -> int:
    """What Metal still lets this process allocate; the unified memory is also the system's RAM,
    so without the figure (older torch) RAM alone bounds it."""
    import torch  # lazy, as above

    mps = getattr(torch, "mps", None)
    try:
        return int(mps.recommended_max_memory()) - int(mps.driver_allocated_memory())
    except (AttributeError, RuntimeError):
        return ram


def memory_name(device: str) -> str:
    """Where the memory a message talks about is: "in RAM", "on cuda", "on mps"."""
    return "in RAM" if device.startswith("cpu") else f"on {device}"


def require_fits(need: MemoryNeed, device: str) -> None:
    """Refuse with the numbers; the shortfall is named, since two sizes rounded to 0.1 GB can read alike."""
    free = available_bytes(device)
    if need.total > free:
        raise InsufficientMemoryError(
            f"{need.what} needs about {format_bytes(need.total)} {memory_name(device)} ({need.breakdown()}), "
            f"but only {format_bytes(free)} is available ({format_bytes(need.total - free)} short); "
            "close other programs, lower the context size or use a shorter document"
        )


def require_all_fit(needs: Mapping[str, MemoryNeed]) -> None:
    """Each device's need against that device's free memory (see needs_by_device)."""
    for device, need in needs.items():
        require_fits(need, device)
