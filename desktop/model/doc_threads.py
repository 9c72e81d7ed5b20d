"""Each open document's thread: its engine session and the questions asked with their answers.

The engine's DocumentSession holds what follow-ups reuse (the target's cached prefix, the
draft's cache); the thread keeps what the user saw: each question, each answer tagged with
the path that served it (RunResult.served_by) and its TTFT, and the background fill's state.
Threads are kept per document path, so switching documents and back shows the old thread;
a reloaded document (a new Document object) gets a fresh engine session, its thread stays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.api import Document, DocumentSession, RunResult

# served_by values: a SpecPrefill answer (after it, the background fill has work to do) ...
SPEC_SERVED = frozenset({"spec", "spec_cached_draft", "spec_read_ahead"})
# ... and a full-prefix answer from a cache: a compare on a follow-up then says what it compares.
CACHED_FULL_SERVED = frozenset({"cached_full", "saved_state"})
# Every full-prefix answer leaves the whole document cached in the target.
FULL_SERVED = CACHED_FULL_SERVED | {"cold_full"}
FOLLOW_UP_CAPTION = "Follow-up: cached full document vs SpecPrefill"

ASKING, ANSWERED, CANCELLED, FAILED = "asking", "answered", "cancelled", "failed"


@dataclass
class Exchange:
    """One question and the answers it got (one, or two for a compare)."""

    question: str
    mode: str  # "auto" | "baseline" | "spec" | "both"
    answers: list[RunResult] = field(default_factory=list)
    state: str = ASKING
    message: str = ""  # why it failed

    @property
    def is_cached_compare(self) -> bool:
        """A compare whose full-prefill side came from the cached document, not a cold prefill."""
        return self.mode == "both" and any(
            a.run == "baseline" and a.served_by in CACHED_FULL_SERVED for a in self.answers
        )

    @property
    def caption(self) -> str:
        return FOLLOW_UP_CAPTION if self.is_cached_compare else ""


# What the background fill is doing for a document: off (Settings), idle (nothing to do yet),
# filling, paused (a question took the target; it resumes), ready, failed; and before it, reading
# (the draft's read-ahead of the opened document).
FILL_OFF, FILL_IDLE, FILL_FILLING, FILL_PAUSED, FILL_READY, FILL_FAILED = (
    "off",
    "idle",
    "filling",
    "paused",
    "ready",
    "failed",
)
FILL_READING = "reading"


@dataclass
class FillState:
    status: str = FILL_IDLE
    done: int = 0
    total: int = 0
    detail: str = ""


class DocumentThread:
    def __init__(self, document: Document) -> None:
        self.document = document
        self.session = DocumentSession(document)
        self.exchanges: list[Exchange] = []
        self.fill = FillState()
        self.read_ahead_started = False  # the draft reads a document ahead once, when it opens

    @property
    def name(self) -> str:
        return self.document.path.name

    def reopen(self, document: Document) -> None:
        """The document was loaded again: a fresh engine session (its text may have changed)."""
        if document is not self.document:
            self.document = document
            self.session = DocumentSession(document)
            self.fill = FillState()
            self.read_ahead_started = False  # a fresh session: read it again

    def ask(self, question: str, mode: str) -> Exchange:
        exchange = Exchange(question, mode)
        self.exchanges.append(exchange)
        return exchange

    @property
    def had_spec_answer(self) -> bool:
        """A SpecPrefill answer was given: the full document is worth filling in the background."""
        return any(
            answer.served_by in SPEC_SERVED for exchange in self.exchanges for answer in exchange.answers
        )

    @property
    def last_served(self) -> str:
        """How the latest answer was served ("" before any)."""
        answers = [answer for exchange in self.exchanges for answer in exchange.answers]
        return answers[-1].served_by if answers else ""

    def clear(self) -> None:
        self.exchanges.clear()
        self.fill = FillState()
        self.read_ahead_started = False  # its caches cleared: read it again


class ThreadBook:
    """The threads of every document opened in this window, by path, and the active one."""

    def __init__(self) -> None:
        self._threads: dict[str, DocumentThread] = {}
        self.active: DocumentThread | None = None  # the open document's

    def open(self, document: Document) -> DocumentThread:
        """The document's thread (a new one the first time), now the active one."""
        self.active = self._thread_of(document)
        return self.active

    def _thread_of(self, document: Document) -> DocumentThread:
        key = str(document.path)
        thread = self._threads.get(key)
        if thread is None:
            thread = self._threads[key] = DocumentThread(document)
        else:
            thread.reopen(document)
        return thread

    def engine_replaced(self) -> None:
        """A new engine holds none of the old one's caches: every fill starts over."""
        for thread in self._threads.values():
            thread.fill = FillState()

    def __len__(self) -> int:
        return len(self._threads)
