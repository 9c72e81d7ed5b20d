"""One formatting module: every figure reads the same in the CLI, the reports and the app."""

from __future__ import annotations

import pytest

from engine.core import memory
from engine.core.formatting import (
    MISSING,
    format_accuracy,
    format_bytes,
    format_count,
    format_percent,
    format_percent_short,
    format_rate,
    format_ratio,
    format_seconds,
)


def test_seconds():
    assert [format_seconds(s) for s in (0.35, 4.0, 42.123, 128.4)] == ["350 ms", "4.00 s", "42.12 s", "128 s"]
    assert format_seconds(None) == MISSING


def test_counts_rates_and_bytes():
    assert format_count(1234567) == "1,234,567"
    assert (format_count(1, "case"), format_count(3, "case"), format_count(0, "case")) == (
        "1 case",
        "3 cases",
        "0 cases",
    )
    assert format_rate(12.345) == "12.3 tok/s"
    assert [format_bytes(n) for n in (512, 4096, 300 * 2**20, 3 * 2**29)] == [
        "512 B",
        "4.0 KB",
        "300.0 MB",
        "1.5 GB",
    ]
    assert memory.format_bytes is format_bytes  # the memory checks' messages read as the app does


def test_percentages_ratios_and_accuracy():
    assert (format_percent(0.9), format_percent(None)) == ("90.0%", MISSING)
    assert [format_percent_short(x) for x in (0.35, 0.025, 0.0, 1.0)] == ["35%", "2.5%", "0%", "100%"]
    assert (format_ratio(5.0), format_ratio(None)) == ("5.00×", MISSING)
    assert format_accuracy(0.9, 10) == "90.0% (9/10)"
    assert format_accuracy(None, 0) == MISSING


@pytest.mark.parametrize(
    "accuracy, n_scored, text", [(1.0, 2, "100.0% (2/2)"), (0.5, 2, "50.0% (1/2)"), (2 / 3, 3, "66.7% (2/3)")]
)
def test_accuracy_counts_the_correct_answers(accuracy, n_scored, text):
    assert format_accuracy(accuracy, n_scored) == text
