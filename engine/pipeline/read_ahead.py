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
scores it; the prefix noted for the target's fill is the target's, in the target's tokens. A
document longer than one draft pass is read segment by segment (each segment's head and slice,
engine.draft.segments), the parts a question's segmented pass finds in the draft cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.core.cancel import NEVER, AnyCancel, CancelToken
from engine.core.errors import Cancelled, SpecPrefillError
from engine.core.events import ReadAheadEnded, ReadAheadEvent, ReadAheadProgress
from engine.core.formatting import format_bytes
from engine.core.settings import RunSettings
from engine.draft.scorer import DraftPrefix, DraftScorer
from engine.draft.segments import plan_segments, segment_prefix
from engine.llama.runtime import TargetRuntime
from engine.pipeline.locking import TargetLocks
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.request import prepare_prompt
from engine.pipeline.run_policy import RunPolicy
from engine.pipeline.session import DocumentSession
from engine.pipeline.span_selection import prompt_the_draft_reads

# The prefix (system turn, template head, document) does not depend on the question, so any
# question renders it; the real one's tokens come after it.
PLACEHOLDER_QUESTION = "?"
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
            total = sum(len(part.prefix) for part in planned)
            if all(part.prefix.complete for part in planned):
                yield ReadAheadEnded("not_needed", total, total, 0.0, HELD)
                return
            status, detail = yield from self._read(session, planned, total, token)
        if status == "paused" and cancel.cancelled:
            status = "cancelled"
        filled = sum(part.prefix.filled for part in planned)
        yield ReadAheadEnded(status, filled, total, time.perf_counter() - t0, detail)

    def _plan(self, session: DocumentSession, settings: RunSettings) -> list[ReadPart] | str:
        """The draft's prefixes to read for the document, in the tokens the draft reads: the whole
        prefix, or each segment's head and slice for a document longer than one draft pass (empty,
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
        start, end = target.doc_token_span
        if self._policy.window_fit(target.n_tokens, settings, end - start).fits:
            # what the target's background fill prefills next: the target's prefix
            session.note_prefix(self._prefixes.key(session, settings), target.tokens[: target.tail_start])
        if len(pieces) == 1:
            key = self._prefixes.draft_key(session, settings)
            whole = self._prefixes.draft_prefix(
                key, prompt.tokens[: prompt.tail_start], settings.draft_window
            )
            return [ReadPart(whole, lambda prefix: self._prefixes.keep_draft_prefix(key, prefix))]
        segments = self._prefixes.draft_segments(session, settings)
        tokens = list(prompt.tokens)
        return [
            ReadPart(
                segments.prefix_for(piece, segment_prefix(tokens, prompt.doc_token_span, piece)),
                lambda prefix, piece=piece: "" if segments.keep(piece, prefix) else segment_too_big(prefix),
            )
            for piece in pieces
        ]

    def _read(self, session: DocumentSession, parts: list[ReadPart], total: int, token: CancelToken):
        """Read chunk by chunk, part after part, each chunk under the models' lock; returns (status, detail)."""
        done = sum(part.prefix.filled for part in parts)
        for part in parts:
            prefix = part.prefix
            while not prefix.complete:
                with self._locks.background_turn(token) as turn:
                    if not turn:
                        return "paused", ""
                    started, before = time.perf_counter(), prefix.filled
                    try:
                        self._scorer.fill_prefix_chunk(prefix, token)
                    except Cancelled:
                        return "paused", ""
                    except (SpecPrefillError, MemoryError) as error:
                        return "failed", str(error)
                    finally:  # a chunk a request cut short was draft time spent before the question too
                        session.read_ahead_s += time.perf_counter() - started
                    problem = part.keep(prefix)
                    if problem:
                        return "failed", problem
                done += prefix.filled - before
                yield ReadAheadProgress(done, total)
        return "done", ""


@dataclass(frozen=True)
class ReadPart:
    """One prefix the read-ahead fills (the document's, or one segment's head and slice) and how it is
    kept in the draft cache (returns why not, "" when kept)."""

    prefix: DraftPrefix
    keep: Callable[[DraftPrefix], str]


def segment_too_big(prefix: DraftPrefix) -> str:
    return f"a segment's draft keys ({format_bytes(prefix.nbytes())}) are larger than the draft cache"
