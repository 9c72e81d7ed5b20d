"""A session's document prefix and what is kept of it: its key, the part the prefix context
holds, its saved state on disk (engine.pipeline.state_store) and the draft's keys for it
(engine.pipeline.draft_cache), in the tokens the draft reads: the target's, or with a draft of
another family its own (the span path)."""

from __future__ import annotations

import logging
import time
from collections.abc import Generator

import numpy as np

from engine.core.events import EngineEvent, Notice, RunName, StageChanged
from engine.core.formatting import format_bytes
from engine.core.settings import RunSettings
from engine.draft.scorer import DraftPrefix
from engine.llama.runtime import TargetRuntime
from engine.pipeline.draft_cache import DocumentSegments, DraftCaches, DraftKey
from engine.pipeline.engine_open import EngineInfo
from engine.pipeline.request import Request
from engine.pipeline.session import DocumentSession, PrefixKey
from engine.pipeline.state_store import STORE_ERRORS, StateLoad, StateStore

log = logging.getLogger(__name__)


class PrefixCaches:
    """The saved-state store (None or a cap of 0: off) and the draft's caches (None: off) for the
    models `info` describes."""

    def __init__(
        self, info: EngineInfo, state_store: StateStore | None = None, draft_caches: DraftCaches | None = None
    ):
        self.info = info
        self.state_store = state_store
        self.draft_caches = draft_caches

    # -- the document prefix and its key ------------------------------------------------
    def key(self, session: DocumentSession, settings: RunSettings) -> PrefixKey:
        info = self.info
        return session.key(
            info.target_path, info.draft_path, settings.system_prompt, info.n_ctx, info.flash_attn
        )

    def draft_key(self, session: DocumentSession, settings: RunSettings) -> DraftKey:
        """The key of the draft's keys for the session's document: its prefix key, and the draft's
        own tokens on the span path (EngineInfo.selection "spans") where they are not the target's."""
        return DraftKey(self.key(session, settings), "draft" if self.info.selection == "spans" else "target")

    def document_prefix(self, session: DocumentSession, request: Request) -> tuple[PrefixKey, np.ndarray]:
        """The request's document prefix and its key."""
        prompt = request.prompt
        return self.key(session, request.settings), prompt.tokens[: prompt.tail_start]

    def session_prefix(self, session: DocumentSession, request: Request) -> tuple[PrefixKey, np.ndarray]:
        """The request's document prefix and its key, noted in the session (what a background fill fills)."""
        key, prefix = self.document_prefix(session, request)
        session.note_prefix(key, prefix)
        return key, prefix

    @staticmethod
    def held(session: DocumentSession, key: PrefixKey, prefix: np.ndarray, runtime: TargetRuntime) -> int:
        """Tokens of this prompt's prefix the prefix context holds for the session (all of them, or
        a background fill's part), everything after them removed; 0 when none can be reused."""
        held = session.held_tokens(key, prefix, runtime.context)
        return held if held and runtime.context.remove_after(held) else 0

    # -- saved states -------------------------------------------------------------------
    def has_saved(self, key: PrefixKey) -> bool:
        return self.state_store is not None and self.state_store.has(key)

    def load_saved(
        self, run: RunName, key: PrefixKey, prefix: np.ndarray, runtime: TargetRuntime
    ) -> Generator[EngineEvent, None, int]:
        """Load this prompt's prefix from the state store into the KV cache; returns its length, or 0
        (no saved state, or one that failed its checks: a Notice says why)."""
        if not self.has_saved(key):
            return 0
        yield StageChanged(run, "prefill", "loading the document's saved prefix state")
        try:
            loaded = self.state_store.load(runtime.context, key, prefix)
        except STORE_ERRORS as error:  # the cold prefill that follows clears whatever the load left
            loaded = StateLoad(notice=f"saved state not used: {error}; prefilling the document instead")
        if loaded.notice:
            yield Notice(run, loaded.notice)
        return loaded.tokens

    def save(self, key: PrefixKey, prefix: np.ndarray, runtime: TargetRuntime) -> str:
        """Save the prefix the KV cache holds (the tail and answer after it removed first) to the store;
        returns why it was not saved ("" when saved, or when saving is off). The session's prefix
        stays valid: its next question removes what follows the prefix anyway."""
        store, context = self.state_store, runtime.context
        if store is None or not store.enabled or not context.remove_after(len(prefix)):
            return ""
        start = time.perf_counter()
        try:
            saved = store.save(context, key, prefix, self.info.target_name)
        except STORE_ERRORS as error:
            return f"the document's prefix state was not saved: {error}"
        if saved is None:
            return "the document's prefix state is larger than the saved-state cache size: not saved"
        log.info(
            "saved the prefix state (%d tokens, %.1f MB) in %.2fs",
            saved.prefix_tokens,
            saved.state_bytes / 1e6,
            time.perf_counter() - start,
        )
        return ""

    def forget(self, session: DocumentSession, saved: bool, draft: bool) -> None:
        """Drop the draft's keys for the session's document (with `draft`) and its saved states (with `saved`)."""
        if draft and self.draft_caches is not None:
            self.draft_caches.drop(session.document_sha256)
        if saved and self.state_store is not None:
            self.state_store.clear(session.document_sha256)

    # -- the draft's keys ---------------------------------------------------------------
    def draft_prefix(self, key: DraftKey, prefix: np.ndarray, window: int) -> DraftPrefix | None:
        """The draft's kept keys for the document's prefix `prefix` (the draft's tokens; empty the first
        time); None when the draft cache is off."""
        if self.draft_caches is None:
            return None
        return self.draft_caches.prefix_for(key, prefix, window)

    def keep_draft_prefix(self, key: DraftKey, draft_prefix: DraftPrefix) -> str:
        """Keep the draft's keys for the next question; why not ("" when kept, or nothing to keep)."""
        if self.draft_caches.keep(key, draft_prefix):
            return ""
        if draft_prefix.cache is None:
            return ""
        return (
            f"the draft's keys for this document ({format_bytes(draft_prefix.nbytes())}) are larger than the "
            f"draft cache ({format_bytes(self.draft_caches.cap)}): a follow-up scores the whole document again"
        )

    def draft_segments(
        self, session: DocumentSession | None, settings: RunSettings
    ) -> DocumentSegments | None:
        """The draft's kept segments of a session's document longer than its window; None when there is
        no session or the draft cache is off."""
        if session is None or self.draft_caches is None or not self.draft_caches.enabled:
            return None
        return DocumentSegments(self.draft_caches, self.draft_key(session, settings), settings.draft_window)

    def segments_kept_note(
        self, segments: DocumentSegments, pieces: list, tokens: list[int], doc_span: tuple[int, int]
    ) -> str:
        """Why a follow-up will score some segments again ("" when the cache keeps them all)."""
        held = segments.count_held(pieces, tokens, doc_span)
        if held == len(pieces):
            return ""
        return (
            f"the draft cache ({format_bytes(self.draft_caches.cap)}) keeps the draft's keys for {held} of "
            f"this document's {len(pieces)} segments: a follow-up scores the others again"
        )
