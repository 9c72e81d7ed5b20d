"""How much of a document longer than the target's window a run saw, beside another text.

The wording is the engine's (engine.api.fit_note, as the A/B reports print it), so a truncated
full prefill never passes for one that read the whole document, wherever a run's result shows
(its pane, the thread, a saved answer).
"""

from __future__ import annotations

from engine.api import RunResult, fit_note


def with_fit(text: str, result: RunResult) -> str:
    """`text`, then " · truncated: saw 52% of the document" when the run did not see it all."""
    fit = fit_note(result)
    return f"{text} · {fit}" if fit else text
