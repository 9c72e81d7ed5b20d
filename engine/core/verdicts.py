"""Verdicts measured once per machine and kept in the cache dir: a JSON object file of
{key: record}, the key naming what the verdict holds for (the CPU self-test's build, CPU and
variant; the draft precision's CPU, torch and draft file)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.core.atomic import write_text_atomic
from engine.core.private import private_dir


def read_verdicts(path: Path) -> dict:
    """The file's verdicts; {} when it is missing, unreadable or not a JSON object."""
    try:
        verdicts = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return verdicts if isinstance(verdicts, dict) else {}


def write_verdict(path: Path, key: str, record: dict) -> None:
    """Add (or replace) one verdict, the file written whole and atomically; OSError when it cannot be."""
    verdicts = read_verdicts(path)
    verdicts[key] = record
    private_dir(path.parent)
    write_text_atomic(path, json.dumps(verdicts, indent=1, sort_keys=True))
