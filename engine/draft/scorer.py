"""Token importance from the draft's look-ahead attention (SpecPrefill, Liu et al. 2025).

1. Prefill the prompt minus its last token with SDPA, in chunks (memory stays bounded,
   and Cancel and progress get a say between layers). Optionally each prompt token
   attends only to the first tokens and a recent window (a sliding window with attention
   sinks): the draft's cost then grows linearly past the window instead of quadratically.
2. Feed the last prompt token, then greedy look-ahead tokens, one at a time. At each
   step, capture every layer's and head's softmax(q k^T / sqrt(d)) and keep the columns
   of the prompt's keys.
3. Smooth each row (avg-pool), max over layers x heads, mean over steps. The reference
   takes every layer; `ScoringParams.first_layer` takes the layers from it on only.
4. Optionally (`ScoringParams.question_rows`), the queries of the prompt's last tokens before the
   final one (the question and the assistant header, at most DRAFT_QUESTION_ROWS_MAX of them) score
   the prompt too, as SnapKV's observation window does (engine.draft.question_rows): each of their
   rows is reduced like a step's, and the mean is over steps and rows alike.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from transformers import AttentionInterface, DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import SettingsError
from engine.core.settings import DRAFT_PREFILL_CHUNK, DRAFT_WINDOW_SINKS, RunSettings
from engine.core.steps import Steps, chunk_ranges, run_to_end
from engine.draft.question_rows import QuestionRows, question_recorder
from engine.draft.selection import step_importance

ATTN_IMPL = "specprefill"


@dataclass
class _Capture:
    """Per-step buffer the attention function fills: layer index -> (heads, n_prompt) probabilities."""

    n_prompt: int
    first_layer: int = 0  # layers before it are not recorded
    rows: dict[int, torch.Tensor] = field(default_factory=dict)

    def wants(self, layer: int) -> bool:
        return layer >= self.first_layer


_ACTIVE: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar("specprefill_capture", default=None)


_QuestionRows = QuestionRows  # the name research/scoring wraps the recorder's importance by
_QUESTION: contextvars.ContextVar[QuestionRows | None] = contextvars.ContextVar(
    "specprefill_question", default=None
)


@dataclass(frozen=True)
class PrefillWindow:
    """During the draft's prefill, a query sees the first `sinks` keys and its last `recent` keys."""

    recent: int
    sinks: int = DRAFT_WINDOW_SINKS


_WINDOW: contextvars.ContextVar[PrefillWindow | None] = contextvars.ContextVar(
    "specprefill_window", default=None
)


def window_keys(
    key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, q_len: int, window: PrefillWindow
):
    """Drop the keys no query of this chunk may see: everything between the sinks and the
    `recent` keys before the chunk's first query. Every query then sees at least `recent`
    earlier tokens. Keys carry their rotary positions already, so slicing keeps them right."""
    kv_len = key.shape[2]
    tail = window.recent + q_len
    if kv_len <= window.sinks + tail:
        return key, value, mask
    head = window.sinks

    def cut(t: torch.Tensor) -> torch.Tensor:
        return torch.cat([t[..., :head, :], t[..., kv_len - tail :, :]], dim=-2)

    if mask is not None:
        mask = torch.cat([mask[..., :head], mask[..., kv_len - tail :]], dim=-1)
    return cut(key), cut(value), mask


def prompt_attention_probs(
    query: torch.Tensor, key: torch.Tensor, scaling: float, n_prompt: int
) -> torch.Tensor:
    """softmax(q k^T * scaling) of one query token over all keys, sliced to the prompt's keys.

    query: (1, H, 1, d); key: (1, KVH, kv_len, d) with grouped-query heads. Returns (H, n_prompt).
    """
    n_heads, n_kv_heads = query.shape[1], key.shape[1]
    # Each KV head's keys serve its group of query heads as they lie: no per-head copy of the keys.
    grouped = query[0, :, 0].float().reshape(n_kv_heads, n_heads // n_kv_heads, -1)  # (KVH, G, d)
    logits = torch.einsum("kgd,kld->kgl", grouped, key[0].float()).reshape(n_heads, -1) * scaling
    return torch.softmax(logits, dim=-1)[:, :n_prompt]


def capturing_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """SDPA for the forward pass; during a look-ahead step, also record the prompt attention, and
    during the prefill of the question's tokens, theirs (before the window cuts any key)."""
    capture = _ACTIVE.get()
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    if capture is not None and query.shape[2] == 1 and capture.wants(module.layer_idx):
        capture.rows[module.layer_idx] = prompt_attention_probs(query, key, scale, capture.n_prompt)
    question = _QUESTION.get()
    if question is not None and query.shape[2] > 1:
        question.record(module.layer_idx, query, key, scale)
    window = _WINDOW.get()
    if window is not None and query.shape[2] > 1:
        key, value, attention_mask = window_keys(key, value, attention_mask, query.shape[2], window)
    return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)


AttentionInterface.register(ATTN_IMPL, capturing_attention)
AttentionMaskInterface.register(ATTN_IMPL, sdpa_mask)


@dataclass(frozen=True)
class ScoringParams:
    """How one scoring pass reads the draft: look-ahead steps, the smoothing width, the prefill's
    attention window (0 = full attention), the first layer whose attention is scored, and how many
    prompt tokens before the last (the question's) score with their own queries (0: none; the scorer
    records at most DRAFT_QUESTION_ROWS_MAX, the last ones)."""

    lookahead: int = RunSettings.lookahead
    kernel: int = RunSettings.kernel
    window: int = 0
    first_layer: int = RunSettings.first_scored_layer
    question_rows: int = 0

    @classmethod
    def from_settings(cls, settings: RunSettings, question_rows: int = 0) -> ScoringParams:
        """`question_rows`: the prompt's (PreparedPrompt.question_rows), used when settings.score_question."""
        return cls(
            settings.lookahead,
            settings.kernel,
            settings.draft_window,
            settings.first_scored_layer,
            question_rows if settings.score_question else 0,
        )


@dataclass(frozen=True)
class ScoreResult:
    importance: np.ndarray  # (n_prompt,) float64
    lookahead_tokens: list[int]  # greedy tokens the draft produced
    steps: int  # look-ahead steps actually scored (stops early at EOS)
    reused_prefix: int = 0  # leading prompt tokens whose keys and values came from a DraftPrefix
    segments: int = 1  # passes the prompt took (engine.draft.segments: longer than the draft's window)


@dataclass
class DraftPrefix:
    """The draft's keys and values for a prompt's first tokens (a document's prefix), kept between
    questions so that a follow-up prefills only its own tail in the draft.

    Empty (cache None) until a scoring pass whose prompt starts with `tokens` fills it; after each
    pass the cache is cut back to the prefix. `window` is the prefill window it was computed with:
    the keys and values depend on it."""

    tokens: np.ndarray
    window: int
    cache: DynamicCache | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def filled(self) -> int:
        """Tokens whose keys and values it holds: all of them, or a read-ahead's first chunks."""
        return self.cache.get_seq_length() if self.cache is not None else 0

    @property
    def complete(self) -> bool:
        return self.filled >= len(self.tokens) > 0

    def nbytes(self) -> int:
        if self.cache is None:
            return 0
        return sum(
            t.numel() * t.element_size()
            for layer in self.cache.layers
            for t in (layer.keys, layer.values)
            if t is not None
        )

    def fits(self, tokens: list[int], window: int) -> bool:
        """Whether this prefix starts the prompt (with a token after it to score) at this window."""
        n = len(self.tokens)
        return window == self.window and 0 < n < len(tokens) and list(self.tokens) == tokens[:n]


class DraftScorer:
    """Scores prompt tokens with a loaded transformers causal LM (attn_implementation=ATTN_IMPL)."""

    def __init__(
        self,
        model,
        eos_ids: set[int],
        prefill_chunk: int = DRAFT_PREFILL_CHUNK,
        window_sinks: int = DRAFT_WINDOW_SINKS,
    ):
        self.model = model
        self.eos_ids = eos_ids
        self.prefill_chunk = prefill_chunk
        self.window_sinks = window_sinks  # first tokens every query sees when the prefill is windowed
        self.device = next(model.parameters()).device

    @property
    def trained_window(self) -> int:
        """The positions the draft was trained on: one scoring pass stays within them."""
        return int(getattr(self.model.config, "max_position_embeddings", 0) or 1 << 30)

    @property
    def n_layers(self) -> int:
        return len(self.model.model.layers)

    def _check_token_ids(self, tokens: list[int]) -> None:
        """A draft whose vocabulary is compatible but shorter than the target's (the target adds
        special tokens past its end) cannot embed those ids: refuse with the id, not an IndexError."""
        rows = self.model.get_input_embeddings().num_embeddings
        top = max(tokens)
        if top >= rows:
            raise ValueError(
                f"the prompt holds token id {top}, past the draft's vocabulary of {rows:,} tokens; "
                "use a draft with the target's full vocabulary"
            )

    def score(
        self, tokens: list[int], params: ScoringParams = ScoringParams(), cancel: CancelToken = NEVER
    ) -> ScoreResult:
        return run_to_end(self.iter_score(tokens, params, cancel))

    def iter_score(
        self,
        tokens: list[int],
        params: ScoringParams = ScoringParams(),
        cancel: CancelToken = NEVER,
        prefix: DraftPrefix | None = None,
        split: int = 0,
    ) -> Steps[ScoreResult]:
        """Yields (tokens prefilled, total) after each prefill chunk; returns the scores.

        params.window > 0: prompt tokens attend to the first tokens and their last `window` tokens
        only (look-ahead queries still score every prompt key).
        prefix: keys and values kept for the prompt's first tokens. When it fits the prompt, a
        filled one spares their prefill and an empty one is filled; either way it ends holding
        the prefix only. The prefix and the rest are prefilled in separate chunks, so a cached
        prefix gives the scores a cold pass gives.
        split: without a prefix, where the document ends: no prefill chunk crosses it, so that a pass
        with no cache computes the document's keys in the chunks a cached one (or a read-ahead) does,
        and scores it bit for bit alike.
        """
        if len(tokens) < 2:
            raise ValueError("need at least two prompt tokens to score")
        if params.lookahead < 1:  # zero steps would average nothing: every score NaN
            raise ValueError(f"lookahead must be at least 1, got {params.lookahead}")
        self.check_first_layer(params.first_layer)
        self._check_token_ids(tokens)
        window = params.window
        if prefix is not None and not prefix.fits(tokens, window):
            prefix = None
        with self._cancellable(cancel), torch.inference_mode():
            reused = prefix.filled if prefix is not None else 0  # all of it, or a read-ahead's part
            cache = prefix.cache if reused else DynamicCache(config=self.model.config)
            if prefix is not None:
                prefix.cache = None  # until this pass has left it holding the prefix again
            body = tokens[:-1]
            prefill_window = PrefillWindow(window, self.window_sinks) if window > 0 else None
            split = len(prefix) if prefix is not None else split
            question = question_recorder(
                len(tokens), reused, params.question_rows, params.kernel, params.first_layer
            )
            try:
                for start, end in chunk_ranges(reused, len(body), self.prefill_chunk, split):
                    # Set per chunk, not around the loop: the caller's code runs at each yield.
                    with _bound(_WINDOW, prefill_window), _bound(_QUESTION, question):
                        self._prefill_chunk(body[start:end], start, cache)
                    yield end, len(tokens)
                result = self._look_ahead(tokens, cache, params, cancel)
                if question is not None:
                    result = with_question(result, question.importance())
            finally:  # cancelled or not: once the prefix's keys and values are whole, keep them
                kept = split if cache.get_seq_length() >= split else reused  # else what it came with
                if prefix is not None and kept:
                    keep_first(cache, kept)
                    prefix.cache = cache
            yield len(tokens), len(tokens)  # the look-ahead covered the last prompt token
            return replace(result, reused_prefix=reused)

    def fill_prefix_chunk(self, prefix: DraftPrefix, cancel: CancelToken = NEVER) -> int:
        """Prefill the prefix's next chunk into its keys and values (a read-ahead, before any question);
        returns the tokens it now holds. The chunks are the ones a scoring pass prefills the prefix in,
        so a pass that goes on from them scores as a cold one does. Cancelled (checked before every
        layer), the chunk under way is dropped and the ones before it are kept."""
        done = prefix.filled
        if done >= len(prefix):
            return done
        end = min(done + self.prefill_chunk, len(prefix))
        window = PrefillWindow(prefix.window, self.window_sinks) if prefix.window > 0 else None
        with self._cancellable(cancel), torch.inference_mode():
            cache = prefix.cache if done else DynamicCache(config=self.model.config)
            try:
                with _bound(_WINDOW, window):
                    self._prefill_chunk([int(t) for t in prefix.tokens[done:end]], done, cache)
            except BaseException:
                if done:
                    keep_first(cache, done)  # the layers this chunk reached before it stopped
                raise
            prefix.cache = cache
        return end

    def check_first_layer(self, first_layer: int) -> None:
        if not 0 <= first_layer < self.n_layers:
            raise SettingsError(
                f"first scored layer {first_layer} is not a layer of the draft "
                f"(it has {self.n_layers}: 0 to {self.n_layers - 1})"
            )

    def _prefill_chunk(self, chunk: list[int], start: int, cache: DynamicCache) -> None:
        # The body only: the LM head is not needed for prompt tokens.
        self.model.model(
            input_ids=self._ids(chunk),
            position_ids=self._positions(start, len(chunk)),
            cache=cache,
            use_cache=True,
        )

    def _look_ahead(
        self, tokens: list[int], cache: DynamicCache, params: ScoringParams, cancel: CancelToken
    ) -> ScoreResult:
        n_prompt = len(tokens)
        total = torch.zeros(n_prompt, dtype=torch.float64)
        generated: list[int] = []
        current, steps = tokens[-1], 0
        while steps < params.lookahead:
            cancel.raise_if_cancelled()
            capture = _Capture(n_prompt=n_prompt, first_layer=params.first_layer)
            next_token = self._step(current, n_prompt - 1 + steps, cache, capture)
            rows = torch.cat([capture.rows[i] for i in sorted(capture.rows)], dim=0).cpu()
            total += step_importance(rows, params.kernel).double()
            steps += 1
            if next_token in self.eos_ids:
                break
            generated.append(next_token)
            current = next_token
        return ScoreResult(importance=(total / steps).numpy(), lookahead_tokens=generated, steps=steps)

    def _step(self, token: int, position: int, cache: DynamicCache, capture: _Capture) -> int:
        with _bound(_ACTIVE, capture):
            out = self.model.model(
                input_ids=self._ids([token]),
                position_ids=self._positions(position, 1),
                cache=cache,
                use_cache=True,
            )
        logits = self.model.lm_head(out.last_hidden_state[:, -1])
        return int(logits.argmax(dim=-1).item())

    def _ids(self, tokens: list[int]) -> torch.Tensor:
        return torch.tensor([tokens], dtype=torch.long, device=self.device)

    def _positions(self, start: int, length: int) -> torch.Tensor:
        return torch.arange(start, start + length, device=self.device).unsqueeze(0)

    def _cancellable(self, cancel: CancelToken):
        """Check Cancel before every decoder layer, so a long prefill chunk stops within a layer."""
        return _LayerHooks(self.model.model.layers, lambda *_: cancel.raise_if_cancelled())


def keep_first(cache: DynamicCache, n_tokens: int) -> None:
    """Cut every layer back to its first n_tokens (a chunk stopped between layers leaves some longer)."""
    for layer in cache.layers:
        extra = layer.get_seq_length() - n_tokens if layer.is_initialized else 0
        if extra > 0:
            layer.crop(-extra)


def with_question(lookahead: ScoreResult, question_rows: torch.Tensor) -> ScoreResult:
    """The mean over the look-ahead's steps and the question's rows (rows, n_prompt), each row alike."""
    total = lookahead.importance * lookahead.steps + question_rows.sum(dim=0).numpy()
    return replace(lookahead, importance=total / (lookahead.steps + len(question_rows)))


@contextlib.contextmanager
def _bound(var: contextvars.ContextVar, value):
    """`var` holds `value` inside the block only (what the attention function reads)."""
    reset = var.set(value)
    try:
        yield
    finally:
        var.reset(reset)


class _LayerHooks:
    def __init__(self, layers, hook):
        self.layers, self.hook, self.handles = layers, hook, []

    def __enter__(self):
        self.handles = [layer.register_forward_pre_hook(self.hook) for layer in self.layers]
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        return False
