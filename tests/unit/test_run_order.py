"""Compare order: the app asks for SpecPrefill first (its answer shows first); the CLI keeps baseline first."""

from __future__ import annotations

from engine.core.events import RunFinished, run_order
from engine.core.settings import RunSettings

DOC = " ".join(f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone." for i in range(20))


def finished_runs(engine, **kwargs) -> list[str]:
    settings = RunSettings(force=True, keep=0.5, chunk_size=8, max_new_tokens=3)
    return [
        e.run
        for e in engine.stream(DOC, "Which item is green?", "both", settings, **kwargs)
        if isinstance(e, RunFinished)
    ]


def test_spec_first_runs_specprefill_before_the_full_prefill(engine):
    assert finished_runs(engine, spec_first=True) == ["spec", "baseline"]
    assert finished_runs(engine) == ["baseline", "spec"]


def test_the_order_does_not_change_the_answers(engine):
    settings = RunSettings(force=True, keep=0.5, chunk_size=8, max_new_tokens=4)

    def answers(spec_first: bool) -> dict[str, str]:
        return {
            e.run: e.result.answer
            for e in engine.stream(DOC, "Which item is green?", "both", settings, spec_first=spec_first)
            if isinstance(e, RunFinished)
        }

    assert answers(True) == answers(False)


def test_run_order_of_single_modes():
    assert run_order("spec", spec_first=True) == ["spec"] and run_order("baseline") == ["baseline"]
