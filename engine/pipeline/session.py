"""A document session: several questions about one document, reusing the target's KV cache.

The prompt is tokenized in parts (engine.llama.prompt.tokenize_parts), so its tokens before
`tail_start` (system turn, template head, document) are the same for every question about
one document: the prefix. After a full (baseline) prefill the target's KV cache holds that
prefix, and the next question only removes what came after it and prefills its own tail.

What the KV cache holds is recorded here, never guessed:
- only a full prefill leaves a reusable prefix; a SpecPrefill run's cache holds only the
  kept tokens and is never reused as a prefix;
- every clear of the target's context bumps its generation (LlamaContext.generation), so
  any other run in between (a one-shot `Engine.stream`, bench, a probe) invalidates it;
- the prefix's key (document, models, system prompt, context size) and its exact tokens
  must match the new prompt's.

Saved states (engine.pipeline.state_store): after a cold full prefill the prefix's KV state is
saved to the cache, keyed the same way. A full-prefix question with no prefix in memory (a new
process, or one invalidated in between) loads it instead of prefilling (`saved_state`); a
damaged or mismatched file gets a notice and a cold prefill.

Modes (`specprefill chat --mode`):
- baseline: always the full prefix: cold the first time, cached after that;
- spec: always SpecPrefill (below the threshold, without --force, it is bypassed and runs as
  baseline does, cache included);
- auto: the first question by SpecPrefill (the fast first answer), or from the saved state
  when the document's prefix was saved (faster still); each later one from the full prefix:
  the first follow-up pays one cold full prefill, the rest are served from its cache. (A
  background full prefill while the user reads the first answer is not built yet.)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from engine.core.events import RunName
from engine.ingest.document import Document

SessionMode = Literal["auto", "baseline", "spec"]
SESSION_MODES: tuple[str, ...] = get_args(SessionMode)
# How an answer's prefill was served: cold_full, cached_full (the prefix in memory), saved_state
# (the prefix loaded from disk) and spec; spec_cached_draft is reserved for the draft's cache.
ServedBy = Literal["cold_full", "cached_full", "saved_state", "spec", "spec_cached_draft"]


def _file_identity(path: Path) -> tuple[str, int]:
    """A model file as the cache sees it: its path and size (a replaced file changes the size)."""
    return str(path), path.stat().st_size if path.exists() else -1


@dataclass(frozen=True)
class PrefixKey:
    """Everything that decides the prefix's tokens and their KV entries."""

    document_sha256: str
    target: tuple[str, int]
    draft: tuple[str, int]
    system_prompt: str
    n_ctx: int


@dataclass(frozen=True)
class _HeldPrefix:
    """A full prefix the target's KV cache holds: its key, tokens, and the context generation."""

    key: PrefixKey
    tokens: np.ndarray
    generation: int


class DocumentSession:
    """One document, asked several questions in turn (Engine.ask)."""

    def __init__(self, document: Document | str):
        self.text = document.text if isinstance(document, Document) else document
        self.document_sha256 = hashlib.sha256(self.text.encode("utf-8")).hexdigest()
        self.answered = 0  # questions answered so far
        self._held: _HeldPrefix | None = None

    @property
    def full_prefix_tokens(self) -> int:
        """Tokens of the full prefix the target's KV cache holds for this session (0: none)."""
        return 0 if self._held is None else len(self._held.tokens)

    def key(self, target_path: Path, draft_path: Path, system_prompt: str, n_ctx: int) -> PrefixKey:
        return PrefixKey(self.document_sha256, _file_identity(target_path), _file_identity(draft_path),
                         system_prompt, n_ctx)

    def run_for(self, mode: str, saved: bool = False) -> RunName:
        """The run a question gets in `mode` (a spec run below the threshold is bypassed later);
        `saved`: the document's full prefix is in the state store."""
        if mode not in SESSION_MODES:
            raise ValueError(f"unknown session mode {mode!r}; expected one of {', '.join(SESSION_MODES)}")
        if mode == "spec" or (mode == "auto" and self.answered == 0 and not saved):
            return "spec"
        return "baseline"

    def reusable_prefix(self, key: PrefixKey, prefix: np.ndarray, generation: int) -> int:
        """Length of the prefix the KV cache holds for this prompt, or 0 when it must be prefilled."""
        held = self._held
        if held is None or held.key != key or held.generation != generation:
            return 0
        return len(prefix) if np.array_equal(held.tokens, prefix) else 0

    def remember_prefix(self, key: PrefixKey, prefix: np.ndarray, generation: int) -> None:
        """The KV cache now holds this full prefix (from a full or cached prefill)."""
        self._held = _HeldPrefix(key, np.array(prefix, copy=True), generation)

    def forget_prefix(self) -> None:
        """The KV cache no longer holds a reusable prefix (a SpecPrefill run, or a run under way)."""
        self._held = None
