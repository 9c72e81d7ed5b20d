"""How numbers read in the UI: seconds, rates, sizes, counts, percentages."""

from __future__ import annotations


def fmt_seconds(seconds: float) -> str:
    if seconds < 1.0:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 100.0:
        return f"{seconds:.2f} s"
    return f"{seconds:.0f} s"


def fmt_rate(tokens_per_second: float) -> str:
    return f"{tokens_per_second:.1f} tok/s"


def fmt_count(n: int) -> str:
    return f"{n:,}"


def fmt_percent(fraction: float) -> str:
    return f"{fraction * 100:.0f}%" if fraction >= 0.1 or fraction == 0 else f"{fraction * 100:.1f}%"


def fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
