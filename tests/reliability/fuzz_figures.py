"""The fuzz tests' figures (cases run, outcomes), printed after the run and saved as JSON.

A registry rather than fixtures: the figures outlive the tests that fill them, until the
terminal summary (conftest) prints them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

_FIGURES: dict[str, dict] = {}
saved_to: Path | None = None


def register(name: str, tally: dict) -> dict:
    _FIGURES[name] = tally
    return tally


def get(name: str) -> dict | None:
    return _FIGURES.get(name)


def lines() -> list[str]:
    out = []
    for name, tally in _FIGURES.items():
        outcomes = ", ".join(f"{kind}: {n}" for kind, n in sorted(tally["outcomes"].items()))
        slowest = f"; slowest case {tally['slowest_s']:.2f} s" if tally.get("slowest_s") else ""
        out.append(f"{name}: {tally['cases']} cases ({outcomes}){slowest}")
    return out


def save(default_dir: Path) -> None:
    """Write the figures as JSON to $SPECPREFILL_FUZZ_REPORT, else into `default_dir`."""
    global saved_to
    if not _FIGURES:
        return
    path = Path(os.environ.get("SPECPREFILL_FUZZ_REPORT") or default_dir / "fuzz_figures.json")
    path.write_text(
        json.dumps({name: {**t, "outcomes": dict(t["outcomes"])} for name, t in _FIGURES.items()}, indent=2)
    )
    saved_to = path
