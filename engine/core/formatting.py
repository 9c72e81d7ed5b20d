"""How numbers read, everywhere: durations, bytes, percentages, ratios and accuracy.

The CLI, the reports and the app all format through here, so one figure reads the same
in a terminal, an HTML report and the window.
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
