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
- the prefix's key (document, models by content, system prompt, context size) and its exact
  tokens must match the new prompt's.

Saved states (engine.pipeline.state_store): after a cold full prefill the prefix's KV state is
saved to the cache, keyed the same way. A full-prefix question with no prefix in memory (a new
process, or one invalidated in between) loads it instead of prefilling (`saved_state`); a
damaged or mismatched file gets a notice and a cold prefill.

Modes (`specprefill chat --mode`):
- baseline: always the full prefix: cold the first time, cached after that;
- spec: always SpecPrefill (below the threshold, without --force, it is bypassed and runs as
  baseline does, cache included); the draft's keys for the prefix are kept too
  (engine.pipeline.draft_cache), so a follow-up scores only its question (`spec_cached_draft`);
- auto: from the full prefix when it is cached or saved; else the first question by SpecPrefill
  (the fast first answer), and while the background full prefill (Engine.background_prefill,
  setting background_prefill) has not finished, the follow-ups too; with the background fill
  off, a follow-up pays one cold full prefill and the next ones are served from its cache.

The full prefix lives in a target context of its own (the engine's prefix context), so the
SpecPrefill runs in between never overwrite it; the background fill writes there batch by batch,
and what it has filled so far is recorded here as a (possibly partial) held prefix.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from engine.core.events import RunName
from engine.ingest.document import Document
from engine.models.identity import content_identity

if TYPE_CHECKING:
    from engine.llama.native import LlamaContext

SessionMode = Literal["auto", "baseline", "spec"]
SESSION_MODES: tuple[str, ...] = get_args(SessionMode)
# How an answer's prefill was served: cold_full, cached_full (the prefix in memory), saved_state
# (the prefix loaded from disk), spec, spec_cached_draft (the draft's prefix from its cache) and
# spec_read_ahead (the first SpecPrefill after the draft read the document ahead, engine.pipeline.read_ahead).
ServedBy = Literal["cold_full", "cached_full", "saved_state", "spec", "spec_cached_draft", "spec_read_ahead"]


def _file_identity(path: Path) -> tuple[str, int, str]:
    """A model file as the cache sees it: its path, size and content (an updated model of the same
    size at the same path must not reuse the old one's states). A draft's model folder has no
    content identity (""); a missing file is (path, -1, "")."""
    try:
        size = path.stat().st_size
        return str(path), size, "" if path.is_dir() else content_identity(path)
    except OSError:
        return str(path), -1, ""


@dataclass(frozen=True)
class PrefixKey:
    """Everything that decides the prefix's tokens and their KV entries."""

    document_sha256: str
    target: tuple[str, int, str]  # path, size, content identity (_file_identity)
    draft: tuple[str, int, str]
    system_prompt: str
    n_ctx: int
    flash_attn: str  # it lays the KV cache's values out differently: a saved state needs the same


@dataclass(frozen=True)
class _HeldPrefix:
    """What the prefix context holds for a session: its key, tokens (the prefix's first ones or all
    of it), and the context generation they were written at."""

    key: PrefixKey
    tokens: np.ndarray
    context: LlamaContext
    generation: int
    complete: bool  # all of the prefix (else the part a background fill has done)

    def valid(self) -> bool:
        """The context still holds these tokens: nothing has cleared it since."""
        return self.context.generation == self.generation


class DocumentSession:
    """One document, asked several questions in turn (Engine.ask)."""

    def __init__(self, document: Document | str):
        self.text = document.text if isinstance(document, Document) else document
        self.segments = tuple(document.segments) if isinstance(document, Document) else ()  # for coverage
        self.document_sha256 = hashlib.sha256(self.text.encode("utf-8")).hexdigest()
        self.answered = 0  # questions answered so far
        self._held: _HeldPrefix | None = None
        self.last_prefix: tuple[PrefixKey, np.ndarray] | None = None
        self.read_ahead_s = 0.0  # the draft's read-ahead time not yet reported by an answer

    def take_read_ahead(self) -> float:
        """The read-ahead seconds for the answer that uses them; later answers report none."""
        seconds, self.read_ahead_s = self.read_ahead_s, 0.0
        return seconds

    @property
    def full_prefix_tokens(self) -> int:
        """Tokens of the full prefix the prefix context holds for this session (0: none, or a part)."""
        held = self._held
        return len(held.tokens) if held is not None and held.complete and held.valid() else 0

    @property
    def filled_tokens(self) -> int:
        """Tokens of the prefix the prefix context holds so far (a background fill's progress)."""
        held = self._held
        return len(held.tokens) if held is not None and held.valid() else 0

    def key(
        self, target_path: Path, draft_path: Path, system_prompt: str, n_ctx: int, flash_attn: str
    ) -> PrefixKey:
        return PrefixKey(
            self.document_sha256,
            _file_identity(target_path),
            _file_identity(draft_path),
            system_prompt,
            n_ctx,
            flash_attn,
        )

    def run_for(
        self,
        mode: str,
        saved: bool = False,
        cached: bool = False,
        background: bool = False,
        fits: bool = True,
    ) -> RunName:
        """The run a question gets in `mode` (a spec run below the threshold is bypassed later).

        saved: the document's full prefix is in the state store; cached: the prefix context holds
        all of it; background: a background full prefill is on (auto answers by SpecPrefill until
        it has finished); fits: the prompt fits the target's window (auto answers a longer one by
        SpecPrefill, which reads all of it, never by a cut full prefill)."""
        if mode not in SESSION_MODES:
            raise ValueError(f"unknown session mode {mode!r}; expected one of {', '.join(SESSION_MODES)}")
        if mode != "auto":
            return mode  # type: ignore[return-value]
        if not fits:
            return "spec"
        if cached or saved:
            return "baseline"
        return "spec" if self.answered == 0 or background else "baseline"

    def holds_full(self, key: PrefixKey) -> bool:
        """Whether the prefix context holds this key's whole prefix (its tokens are checked at use)."""
        return self.full_prefix_tokens > 0 and self._held.key == key

    def held_tokens(self, key: PrefixKey, prefix: np.ndarray, context: LlamaContext) -> int:
        """How many of this prompt prefix's first tokens `context` holds (all of them, the part a
        background fill has done, or 0). A held prefix longer than this one counts when this one
        starts it: a document cut to fit the window is cut a little shorter for a longer question."""
        held = self._held
        if held is None or held.key != key or held.context is not context or not held.valid():
            return 0
        n = min(len(held.tokens), len(prefix))
        return n if np.array_equal(held.tokens[:n], prefix[:n]) else 0

    def remember_prefix(
        self, key: PrefixKey, tokens: np.ndarray, context: LlamaContext, complete: bool = True
    ) -> None:
        """`context` now holds these tokens at its current generation: all of the prefix, or (not
        complete) its first ones."""
        self._held = _HeldPrefix(key, np.array(tokens, copy=True), context, context.generation, complete)

    def forget_prefix(self) -> None:
        """The prefix context no longer holds this session's prefix (cleared, or a run under way)."""
        self._held = None

    def note_prefix(self, key: PrefixKey, prefix: np.ndarray) -> None:
        """The prefix of the latest question's prompt: what a background fill prefills."""
        self.last_prefix = (key, np.array(prefix, copy=True))
