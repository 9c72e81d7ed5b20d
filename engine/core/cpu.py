"""What this machine's CPU is, read from /proc/cpuinfo: an identity that cached verdicts are keyed
by (the CPU self-test's, the draft precision's) and the flags that say which matrix units exist."""

from __future__ import annotations

import hashlib
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_lines(prefixes: tuple[str, ...]) -> list[str]:
    try:
        text = CPUINFO.read_text(errors="replace")
    except OSError:
        return []
    return list(dict.fromkeys(line for line in text.splitlines() if line.startswith(prefixes)))


def cpu_identity() -> str:
    """The CPU's model name and flags, hashed: a verdict measured on one CPU holds for it only."""
    lines = _cpuinfo_lines(("model name", "flags"))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16] if lines else "unknown"


def cpu_flags() -> frozenset[str]:
    """The flags the kernel reports for this CPU (empty where /proc/cpuinfo cannot be read)."""
    flags: set[str] = set()
    for line in _cpuinfo_lines(("flags",)):
        flags.update(line.partition(":")[2].split())
    return frozenset(flags)
