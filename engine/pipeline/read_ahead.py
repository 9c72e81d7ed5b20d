"""The draft's read-ahead: as soon as a document is opened, the draft prefills its prefix into the
draft cache, chunk by chunk, while the user reads and types the first question.

That question's SpecPrefill then drafts only its own rows and the look-ahead (`spec_read_ahead`)
and reports the read-ahead's seconds (RunResult.read_ahead_s), so no draft time is hidden. The
read-ahead holds the models one chunk at a time (TargetLocks.background_turn): a request preempts
it at once (the chunk under way stops before its next layer and is dropped), and the request goes
on from the chunks already read. It also notes the document's prefix for the target's background
full prefill, which follows it: the draft's pass is short and pays off on the very first question,
the target's is long and pays off only on follow-ups.

A draft of another family (the span path, EngineInfo.draft_vocab) reads the document in its own
tokens, rendered in its own template (span_selection.prompt_the_draft_reads), as its SpecPrefill
scores it; the prefix noted for the target's fill is the target's, in the target's tokens.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from engine.core.cancel import NEVER, AnyCancel, CancelToken
from engine.core.errors import Cancelled, SpecPrefillError
from engine.core.events import ReadAheadEnded, ReadAheadEvent, ReadAheadProgress
from engine.core.settings import RunSettings
from engine.draft.scorer import DraftPrefix, DraftScorer
from engine.draft.segments import plan_segments
from engine.llama.runtime import TargetRuntime
from engine.pipeline.draft_cache import DraftKey
from engine.pipeline.locking import TargetLocks
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.request import prepare_prompt
from engine.pipeline.run_policy import RunPolicy
from engine.pipeline.session import DocumentSession
from engine.pipeline.span_selection import prompt_the_draft_reads

# The prefix (system turn, template head, document) does not depend on the question, so any
# question renders it; the real one's tokens come after it.
PLACEHOLDER_QUESTION = "?"
TOO_LONG = "the document is longer than one draft pass: its segments are read with the first question"
HELD = "the draft's cache holds the document already"


class ReadAhead:
    """Reads a session's document prefix into the draft cache between requests (locks), where
    the request's SpecPrefill finds it (prefixes.draft_prefix)."""

    def __init__(
        self,
        locks: TargetLocks,
        runtime: TargetRuntime,
        scorer: DraftScorer,
        policy: RunPolicy,
        prefixes: PrefixCaches,
    ):
        self._locks = locks
        self._runtime = runtime  # its tokenizer renders the prompt
        self._scorer = scorer
        self._policy = policy
        self._prefixes = prefixes

    def run(
        self, session: DocumentSession, settings: RunSettings | None = None, cancel: CancelToken = NEVER
    ) -> Iterator[ReadAheadEvent]:
        """Read until done, cancelled or preempted by a request; ends with exactly one ReadAheadEnded."""
        settings = settings or RunSettings()
        caches = self._prefixes.draft_caches
        if not settings.read_ahead or caches is None or not caches.enabled:
            yield ReadAheadEnded("off", 0, 0, 0.0)
            return
        t0 = time.perf_counter()
        with self._locks.background() as preempt:
            token = AnyCancel(cancel, preempt)
            with self._locks.background_turn(token) as turn:
                planned = self._plan(session, settings) if turn else None
            if planned is None:  # a request came first: it drafts the document itself
                yield ReadAheadEnded("cancelled" if cancel.cancelled else "paused", 0, 0, 0.0)
                return
            if isinstance(planned, str):
                yield ReadAheadEnded("not_needed", 0, 0, 0.0, planned)
                return
            key, prefix = planned
            if prefix.complete:
                yield ReadAheadEnded("not_needed", len(prefix), len(prefix), 0.0, HELD)
                return
            status, detail = yield from self._read(session, key, prefix, token)
        if status == "paused" and cancel.cancelled:
            status = "cancelled"
        yield ReadAheadEnded(status, prefix.filled, len(prefix), time.perf_counter() - t0, detail)

    def _plan(self, session: DocumentSession, settings: RunSettings) -> tuple[DraftKey, DraftPrefix] | str:
        """The key and the draft's prefix for the document, in the tokens the draft reads (empty,
        part-read or whole); or why it is not read ahead."""
        target = prepare_prompt(self._runtime.model, session.text, PLACEHOLDER_QUESTION, settings)
        prompt = prompt_the_draft_reads(self._prefixes.info.draft_vocab, target, settings.system_prompt)
        try:
            pieces = plan_segments(
                prompt.n_tokens,
                prompt.doc_token_span,
                self._policy.draft_pass_tokens(settings),
                follow_ups=True,
            )
        except ValueError as error:  # the template leaves the draft no room: the question's run says so
            return str(error)
        if len(pieces) > 1:
            return TOO_LONG
        start, end = target.doc_token_span
        if self._policy.window_fit(target.n_tokens, settings, end - start).fits:
            # what the target's background fill prefills next: the target's prefix
            session.note_prefix(self._prefixes.key(session, settings), target.tokens[: target.tail_start])
        key = self._prefixes.draft_key(session, settings)
        return key, self._prefixes.draft_prefix(
            key, prompt.tokens[: prompt.tail_start], settings.draft_window
        )

    def _read(self, session: DocumentSession, key: DraftKey, prefix: DraftPrefix, token: CancelToken):
        """Read chunk by chunk, each one under the models' lock; returns (status, detail)."""
        while not prefix.complete:
            with self._locks.background_turn(token) as turn:
                if not turn:
                    return "paused", ""
                started = time.perf_counter()
                try:
                    self._scorer.fill_prefix_chunk(prefix, token)
                except Cancelled:
                    return "paused", ""
                except (SpecPrefillError, MemoryError) as error:
                    return "failed", str(error)
                finally:  # a chunk a request cut short was draft time spent before the question too
                    session.read_ahead_s += time.perf_counter() - started
                problem = self._prefixes.keep_draft_prefix(key, prefix)
                if problem:
                    return "failed", problem
            yield ReadAheadProgress(prefix.filled, len(prefix))
        return "done", ""
