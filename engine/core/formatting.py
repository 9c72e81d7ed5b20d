"""How numbers read, everywhere: durations, seconds, rates, counts, bytes, percentages, ratios and accuracy.

The CLI, the reports and the app all format through here, so one figure reads the same
in a terminal, an HTML report and the window. A figure that may be absent (no scored
case, no baseline) reads as MISSING.
"""

from __future__ import annotations

MISSING = "–"  # a figure that does not exist (no scored case, no baseline)


def format_duration(seconds: float) -> str:
    """A long wait as 1h05m, 3m07s or 42s."""
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def format_seconds(seconds: float | None) -> str:
    """A measured time: 350 ms, 4.21 s, 128 s."""
    if seconds is None:
        return MISSING
    if seconds < 1.0:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 100.0:
        return f"{seconds:.2f} s"
    return f"{seconds:.0f} s"


def format_rate(tokens_per_second: float) -> str:
    return f"{tokens_per_second:.1f} tok/s"


def format_count(n: int, noun: str = "") -> str:
    """1,234, or with a noun: "1 case", "1,234 tokens"."""
    if not noun:
        return f"{n:,}"
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def format_bytes(n: int) -> str:
    """A size in binary units: 512 B, 4.0 KB, 300.0 MB, 1.4 GB."""
    size = float(max(n, 0))
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def format_percent(fraction: float | None) -> str:
    """A measured share, to a tenth of a percent: 90.0%."""
    return MISSING if fraction is None else f"{fraction:.1%}"


def format_percent_short(fraction: float) -> str:
    """A share at a glance: 35%, and a tenth of a percent only below 10% (2.5%), where it matters."""
    return f"{fraction * 100:.0f}%" if fraction >= 0.1 or fraction == 0 else f"{fraction * 100:.1f}%"


def format_ratio(ratio: float | None) -> str:
    """A speed-up: 3.19×."""
    return MISSING if ratio is None else f"{ratio:.2f}×"


def format_accuracy(accuracy: float | None, n_scored: int) -> str:
    """The share of correct answers and what it counts: 90.0% (9/10)."""
    if accuracy is None:
        return MISSING
    return f"{format_percent(accuracy)} ({round(accuracy * n_scored)}/{n_scored})"
