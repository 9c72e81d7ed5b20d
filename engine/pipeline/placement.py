"""Where the target runs: all its layers on the draft's GPU when llama.cpp can offload there, else the CPU.

Pure: the caller passes what torch picked for the draft and what the llama.cpp build reports
(engine.llama.native.build_info), so tests can decide both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ALL_LAYERS = -1  # llama.cpp's n_gpu_layers: a negative value offloads every layer
GPU_NAMES = {"cuda": "CUDA", "mps": "Metal"}  # the draft's GPU types, as llama.cpp's backends are named
NO_OFFLOAD = "llama.cpp build has no GPU offload"


@dataclass(frozen=True)
class TargetPlacement:
    n_gpu_layers: int  # what LlamaModel gets: ALL_LAYERS or 0
    memory_device: str  # whose free memory holds its weights and KV cache: "cpu", or the draft's GPU
    backend: str = ""  # the llama.cpp GPU backend it runs on ("CUDA", "Metal"); "" on the CPU
    reason: str = ""  # why it stays on the CPU; "" when offloaded

    @property
    def offloaded(self) -> bool:
        return self.n_gpu_layers != 0

    @property
    def where(self) -> str:
        """ "GPU (all layers, CUDA)" or "CPU": what the status bar and the run JSON show."""
        return f"GPU (all layers, {self.backend})" if self.offloaded else "CPU"

    def flash_attn(self, requested: str) -> str:
        """The target's flash attention: "on", "off", or "auto" (llama.cpp decides, on a GPU).

        On the CPU, auto means off: llama.cpp's CPU kernel takes each query row alone, so a batch of
        queries over a long cache (a follow-up's question) runs about twice as slow as without it."""
        if requested != "auto":
            return requested
        return "auto" if self.offloaded else "off"

    def describe(self) -> str:
        """The where, with the reason when the target stays on the CPU."""
        return f"{self.where} ({self.reason})" if self.reason else self.where


def gpu_backend(build_flags: str) -> str:
    """The GPU backend named in llama.cpp's system info ("CUDA : ARCHS = 890 | ... | CPU : SSE3 = 1 ..."), or ""."""
    names = re.findall(r"(?:^|\|)\s*(\w+) :", build_flags)
    return next((name for name in names if name != "CPU"), "")


def place_target(draft_device: str, gpu_offload: bool, build_flags: str = "") -> TargetPlacement:
    """All layers on the GPU only when the draft is on one and the llama.cpp build can offload;
    otherwise the CPU, with the reason."""
    kind = draft_device.partition(":")[0]
    if not gpu_offload:
        return TargetPlacement(0, "cpu", reason=NO_OFFLOAD)
    if kind not in GPU_NAMES:
        return TargetPlacement(0, "cpu", reason=f"the draft runs on {kind}, so the target does too")
    return TargetPlacement(ALL_LAYERS, draft_device, backend=gpu_backend(build_flags) or GPU_NAMES[kind])
