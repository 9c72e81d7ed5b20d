"""What a run does with a prompt before any model computes: whether SpecPrefill pays off, how the
prompt fits the target's window, where kept tokens go and how much the selection may keep."""

from __future__ import annotations

from engine.core.errors import ContextOverflowError, PositionsUnsupportedError
from engine.core.settings import DEFAULT_MIN_TOKENS, RunSettings, nominal_keep
from engine.draft.scorer import DraftScorer
from engine.llama.prompt import PreparedPrompt
from engine.pipeline.costmodel import CostModel
from engine.pipeline.engine_open import EngineInfo
from engine.pipeline.fitting import WindowFit
from engine.pipeline.kept_positions import GAPPED

# Where kept tokens go when the prompt is longer than the window (auto positions): packed 0..k-1.
# At 48K it answered 5 of 5 needles where compressed gaps answered 4 (README, Long documents).
LONG_PROMPT_PLACEMENT = "renumber"


class RunPolicy:
    """The decisions that depend only on the prompt's length, the settings, the target's window,
    the draft's trained window and this machine's calibration (cost_model, None when not calibrated)."""

    def __init__(self, info: EngineInfo, scorer: DraftScorer, cost_model: CostModel | None = None):
        self.info = info
        self.scorer = scorer  # its trained window is read at each call: tests shorten it
        self.cost_model = cost_model

    def estimate(self, n_tokens: int, settings: RunSettings) -> dict | None:
        """Predicted TTFTs from this machine's calibration, or None when not calibrated."""
        if self.cost_model is None:
            return None
        return self.cost_model.estimate(
            n_tokens,
            nominal_keep(settings.keep),
            settings.draft_window,
            self.window_fit(n_tokens, settings).budget,
            self.draft_pass_tokens(settings),
        )

    def bypass_reason(self, n_tokens: int, settings: RunSettings) -> str:
        """Why SpecPrefill would not pay off for this prompt ("" when it runs).

        A threshold the user set wins; otherwise the calibrated cost model decides, and
        without a calibration the fixed DEFAULT_MIN_TOKENS does. A prompt longer than the
        window is never bypassed: SpecPrefill's selection is what makes it fit.
        """
        if settings.force or not self.window_fit(n_tokens, settings).fits:
            return ""
        if settings.min_tokens is None and self.cost_model is not None:
            return self.cost_model.bypass_reason(n_tokens, nominal_keep(settings.keep), settings.draft_window)
        threshold = settings.min_tokens if settings.min_tokens is not None else DEFAULT_MIN_TOKENS
        if n_tokens >= threshold:
            return ""
        return f"{n_tokens} tokens is below the SpecPrefill threshold of {threshold}"

    def window_fit(
        self, n_tokens: int, settings: RunSettings, document_tokens: int | None = None
    ) -> WindowFit:
        """A prompt of n_tokens against the target's window (document_tokens: n_tokens when unknown)."""
        doc = n_tokens if document_tokens is None else document_tokens
        return WindowFit(n_tokens, doc, self.info.n_ctx, settings.max_new_tokens)

    def resolve_positions(self, requested: str, fits: bool = True) -> str:
        """The placement that runs: auto is restore, or renumber for a prompt longer than the window
        (restore would reach past the target's trained positions) or on a runtime that rejects
        gapped positions. A requested restore on such a prompt compresses instead (the gapped
        placement nearest to it)."""
        supported = self.info.positions_supported
        if requested == "auto":
            if not supported:
                return "renumber"
            return "restore" if fits else LONG_PROMPT_PLACEMENT
        if requested in GAPPED and not supported:
            raise PositionsUnsupportedError(
                f"this llama.cpp build rejects gapped positions, so `{requested}` is unavailable"
            )
        if requested == "restore" and not fits:
            return "compress"
        return requested

    def draft_pass_tokens(self, settings: RunSettings) -> int:
        """The longest prompt one draft pass scores: its trained window less the look-ahead."""
        return self.scorer.trained_window - settings.lookahead

    def selection_budget(self, prompt: PreparedPrompt, settings: RunSettings) -> int | None:
        """Tokens the kept chunks may hold: None when the whole prompt fits the window, else the window
        less the answer's room; the chunks always kept (the first, the question's) must fit in it."""
        window = self.window_fit(prompt.n_tokens, settings)
        if window.fits:
            return None
        start = prompt.tail_start // settings.chunk_size * settings.chunk_size
        always = min(settings.chunk_size, prompt.n_tokens) + prompt.n_tokens - start
        if always > window.budget:
            raise ContextOverflowError(
                f"the question and the template need {always} tokens and the answer {settings.max_new_tokens}, "
                f"more than the target's {window.n_ctx}-token window: shorten the question or lower the max new tokens"
            )
        return window.budget
