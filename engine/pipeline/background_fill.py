"""The background full prefill: a session's document prefix filled into the prefix context one
batch at a time while no request runs, so follow-ups are served from it (background_thread runs
it on a thread)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from engine.core.cancel import NEVER, AnyCancel, CancelToken
from engine.core.errors import Cancelled, SpecPrefillError
from engine.core.events import BackgroundEnded, BackgroundEvent, BackgroundProgress
from engine.core.settings import RunSettings
from engine.core.steps import chunk_ranges, run_to_end
from engine.pipeline.locking import TargetLocks
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.prefix_context import PrefixContext
from engine.pipeline.session import DocumentSession, PrefixKey


class BackgroundFill:
    """Fills the latest question's prefix (session.last_prefix) in the prefix context, yielding the
    target to any request (locks) and saving the finished prefix (prefixes)."""

    def __init__(self, locks: TargetLocks, prefix_context: PrefixContext, prefixes: PrefixCaches):
        self._locks = locks
        self._prefix_context = prefix_context
        self._prefixes = prefixes

    def needed(self, session: DocumentSession, settings: RunSettings | None = None) -> bool:
        """Whether a background fill has work: the setting is on, a question was asked, and the
        document's full prefix is neither in the prefix context nor saved."""
        settings = settings or RunSettings()
        if not settings.background_prefill or session.last_prefix is None:
            return False
        key = session.last_prefix[0]
        return (
            key == self._prefixes.key(session, settings)
            and not session.holds_full(key)
            and not self._prefixes.has_saved(key)
        )

    def run(
        self, session: DocumentSession, settings: RunSettings | None = None, cancel: CancelToken = NEVER
    ) -> Iterator[BackgroundEvent]:
        """Fill until done, cancelled or preempted by a request; ends with exactly one BackgroundEnded."""
        settings = settings or RunSettings()
        if not self.needed(session, settings):
            held = session.full_prefix_tokens
            yield BackgroundEnded("not_needed", held, held, 0.0)
            return
        key, prefix = session.last_prefix
        t0 = time.perf_counter()
        with self._locks.background() as preempt:
            try:
                token = AnyCancel(cancel, preempt)
                done = session.filled_tokens
                while done < len(prefix):
                    step = self._fill_step(session, key, prefix, token)
                    if step is None:
                        break
                    done = step
                    yield BackgroundProgress(done, len(prefix))
            except Cancelled:
                pass
            except (SpecPrefillError, MemoryError) as error:
                session.forget_prefix()
                yield BackgroundEnded("failed", 0, len(prefix), time.perf_counter() - t0, str(error))
                return
        yield from self._end_fill(session, key, prefix, cancel, time.perf_counter() - t0)

    def _fill_step(
        self, session: DocumentSession, key: PrefixKey, prefix: np.ndarray, token: CancelToken
    ) -> int | None:
        """Prefill the prefix's next batch; the tokens held after it, or None when a request has
        (or has asked for) the target. The batches are a full prefill's, so the result is the
        prefix a cold full prefill leaves."""
        with self._locks.background_turn(token) as turn:
            if not turn:
                return None
            runtime = self._prefix_context.runtime()
            held = session.held_tokens(key, prefix, runtime.context)
            if not held or not runtime.context.remove_after(held):
                held = 0
                runtime.context.clear()
            start, end = chunk_ranges(held, len(prefix), runtime.context.n_batch)[0]
            run_to_end(runtime.iter_extend(prefix[start:end], np.arange(start, end, dtype=np.int32), token))
            session.remember_prefix(key, prefix[:end], runtime.context, complete=end == len(prefix))
            return end

    def _end_fill(
        self,
        session: DocumentSession,
        key: PrefixKey,
        prefix: np.ndarray,
        cancel: CancelToken,
        seconds: float,
    ) -> Iterator[BackgroundEvent]:
        """The fill's last event; a finished prefix is saved first (a notice when it is not)."""
        if session.full_prefix_tokens:
            with self._locks.target:  # quick: the save writes what the context holds
                problem = (
                    ""
                    if self._locks.closed
                    else self._prefixes.save(key, prefix, self._prefix_context.runtime())
                )
            yield BackgroundEnded("done", len(prefix), len(prefix), seconds, problem)
            return
        status = "cancelled" if cancel.cancelled else "paused"
        yield BackgroundEnded(status, session.filled_tokens, len(prefix), seconds)
