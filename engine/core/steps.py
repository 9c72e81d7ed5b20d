"""Long operations are generators: they yield (done, total) progress and return their result.

The pipeline turns the yielded pairs into Progress events with `yield from`; callers
that want only the result use `run_to_end`, which can still pass each pair to a callback.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

R = TypeVar("R")
T = TypeVar("T")
Steps = Generator[tuple[int, int], None, R]


StepFn = Callable[[int, int], None]  # (done, total) of one long operation


def run_to_end(steps: Steps[R], on_step: StepFn | None = None) -> R:
    while True:
        try:
            done, total = next(steps)
        except StopIteration as stop:
            return stop.value
        if on_step is not None:
            on_step(done, total)


def map_steps(steps: Steps[R], each: Callable[[int, int], T]) -> Generator[T, None, R]:
    """Yields each(done, total) for every step of `steps` (an event, or progress through a larger
    whole); returns their result."""
    while True:
        try:
            done, total = next(steps)
        except StopIteration as stop:
            return stop.value
        yield each(done, total)


def chunk_ranges(start: int, end: int, size: int, split: int = 0) -> list[tuple[int, int]]:
    """[a, b) chunks over [start, end) of `size` tokens each, none crossing `split`.

    Prefills split at a document's end, so the document's keys and values come from the same
    chunks whether it is prefilled alone (a session's cached prefix) or with a question after
    it: a cached prefix and a cold one are computed alike, bit for bit."""
    bounds = sorted({start, end} | ({split} if start < split < end else set()))
    return [(a, min(a + size, hi)) for lo, hi in zip(bounds, bounds[1:]) for a in range(lo, hi, size)]
