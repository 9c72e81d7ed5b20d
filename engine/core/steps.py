"""Long operations are generators: they yield (done, total) progress and return their result.

The pipeline turns the yielded pairs into Progress events with `yield from`; callers
that want only the result use `run_to_end`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

R = TypeVar("R")
Steps = Generator[tuple[int, int], None, R]


def run_to_end(steps: Steps[R]) -> R:
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value
