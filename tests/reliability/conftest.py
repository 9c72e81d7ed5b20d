"""The reliability suite reuses two sets of fixtures: the tiny GGUF engine of tests/unit
(real native code, random weights, milliseconds per run) and the fake-engine window of
tests/gui (the real GUI wiring over a scripted engine)."""

from tests.gui.conftest import engine_factory, fake_config, make_window, qsettings  # noqa: F401
from tests.unit.conftest import cache_home, engine, pair  # noqa: F401


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fuzzing figures: cases run and what became of them."""
    from tests.reliability import fuzz_figures

    lines = fuzz_figures.lines()
    if not lines:
        return
    terminalreporter.section("fuzzing figures")
    for line in lines:
        terminalreporter.write_line(line)
    if fuzz_figures.saved_to is not None:
        terminalreporter.write_line(f"saved to {fuzz_figures.saved_to}")
