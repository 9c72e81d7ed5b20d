"""How numbers read in the app: the engine's one formatting module, under the names the widgets use.

Every figure is formatted by engine.core.formatting (through engine.api), so the window reads
the same as the CLI and the reports.
"""

from __future__ import annotations

from engine.api import format_bytes as fmt_bytes
from engine.api import format_count as fmt_count
from engine.api import format_percent_short as fmt_percent
from engine.api import format_rate as fmt_rate
from engine.api import format_seconds as fmt_seconds

__all__ = ["fmt_bytes", "fmt_count", "fmt_percent", "fmt_rate", "fmt_seconds"]
