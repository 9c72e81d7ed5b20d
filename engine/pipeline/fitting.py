"""Prompts longer than the target's context window: how much fits, and how a run says what it saw.

SpecPrefill fits such a prompt by selection: the draft reads all of it and the target gets
the best chunks that fit, so the keep is the smaller of the user's and what fits. Without
SpecPrefill the document is cut (engine.llama.context_fit). Pure arithmetic, so the app's
document line, the cost model and the runs agree on the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.core.formatting import format_count, format_percent_short

# fits: the whole prompt fits; selected: it does not, and SpecPrefill's selection made it fit;
# truncated: it does not, and the document was cut (the full prefill without SpecPrefill).
FitStatus = Literal["fits", "selected", "truncated"]


@dataclass(frozen=True)
class WindowFit:
    """A prompt against the target's window, with room left for the answer."""

    prompt_tokens: int
    document_tokens: int
    n_ctx: int
    max_new_tokens: int

    @property
    def budget(self) -> int:
        """Tokens the target may prefill: the window less the answer's room."""
        return self.n_ctx - self.max_new_tokens

    @property
    def fits(self) -> bool:
        return self.prompt_tokens <= self.budget

    @property
    def windows(self) -> float:
        """How many windows the prompt fills."""
        return self.prompt_tokens / self.n_ctx

    def keep_to_fit(self) -> float:
        """The largest share of the prompt that fits (1.0 when it all does)."""
        if self.fits:
            return 1.0
        return max(self.budget, 0) / self.prompt_tokens

    def spec_keep(self, keep: float) -> float:
        """The keep SpecPrefill runs at: the user's, or less when that would not fit."""
        return min(keep, self.keep_to_fit())

    def describe_selection(self, kept_fraction: float) -> str:
        """ "the document has 212,400 tokens, 6.5× the window; kept 14% to fit"."""
        return (
            f"the document has {format_count(self.document_tokens)} tokens, {self.windows:.1f}× the "
            f"{format_count(self.n_ctx)}-token window; kept {format_percent_short(kept_fraction)} to fit"
        )


def seen_fraction(document_tokens: int, seen_tokens: int) -> float:
    """The share of the document's tokens the target saw (1.0 for an empty document)."""
    return seen_tokens / document_tokens if document_tokens else 1.0
