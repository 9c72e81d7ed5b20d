"""How the target's layers are split between this machine and its RPC workers. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerSplit:
    local_layers: int  # the first layers, on this machine
    worker_layers: tuple[int, ...]  # then each worker's, in order

    @property
    def n_gpu_layers(self) -> int:
        """llama.cpp's n_gpu_layers: the layers given to the (RPC) devices, the last ones."""
        return sum(self.worker_layers)

    def tensor_split(self) -> list[float]:
        """llama.cpp's tensor_split over the workers' devices."""
        return [float(n) for n in self.worker_layers]


def split_layers(n_layers: int, weights: tuple[float, ...]) -> LayerSplit:
    """Layers in proportion to the weights (this machine's first, then each worker's), by largest
    remainder so they add up to n_layers exactly."""
    total = sum(weights)
    if total <= 0:
        raise ValueError("the split's weights add up to 0")
    exact = [n_layers * w / total for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in by_remainder[: n_layers - sum(counts)]:
        counts[i] += 1
    return LayerSplit(counts[0], tuple(counts[1:]))
