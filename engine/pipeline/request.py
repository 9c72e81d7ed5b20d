"""One request's run: its prepared prompt, settings and timings (Request), the checks and
adjustments made before any run starts, and the engine's record of its open event streams."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engine.core.cancel import NEVER, CancelToken
from engine.core.events import Progress, RunName, Stage
from engine.core.settings import RunSettings, greedy
from engine.core.steps import Steps, map_steps
from engine.ingest.document import Segment
from engine.llama.context_fit import Truncation
from engine.llama.prompt import PreparedPrompt, render_parts, tokenize_parts
from engine.pipeline.fitting import WindowFit, seen_fraction

if TYPE_CHECKING:
    from engine.llama.native import LlamaModel


def require_question(question: str) -> None:
    if not question.strip():
        raise ValueError("the question is empty")


def prepare_prompt(
    model: LlamaModel, document_text: str, question: str, settings: RunSettings
) -> PreparedPrompt:
    """The prompt rendered in its parts (prefix, document, question) and tokenized."""
    parts = render_parts(model, document_text, question, settings.system_prompt)
    return tokenize_parts(model, parts)


def for_run(run: RunName, settings: RunSettings, compare: bool) -> RunSettings:
    """A compare's full prefill is what a user gets without SpecPrefill: a document longer than the
    window is cut to fit (and labelled truncated), not refused. Both runs of a compare decode
    greedily: a difference between their answers is then SpecPrefill's, not the sampler's."""
    if not compare:
        return settings
    settings = greedy(settings)
    if run == "baseline" and not settings.truncate:
        return replace(settings, truncate=True)
    return settings


@dataclass(frozen=True)
class Request:
    """One run: its prompt (cut to the context when a full prefill needs it), settings, the whole
    prompt against the window, and when it started."""

    run: RunName
    prompt: PreparedPrompt
    cut: Truncation | None
    window: WindowFit  # the prompt before any cut
    settings: RunSettings
    cancel: CancelToken
    t0: float
    tokenize_s: float
    segments: tuple[Segment, ...] = ()  # the document's pages, sections or files, for coverage
    enough: CancelToken = NEVER  # set while the answer streams: it ends after the token handed out

    def result_fields(self) -> dict:
        """The RunResult fields every run of this request shares."""
        cut = self.cut or Truncation(0, 0, 0, 0)
        return dict(
            run=self.run,
            prompt_tokens=self.prompt.n_tokens,
            tokenize_s=self.tokenize_s,
            truncated_tokens=cut.cut_tokens,
            truncated_chars=cut.cut_chars,
            document_tokens=self.window.document_tokens,
        )

    def full_prefill_fields(self) -> dict:
        """How much of the document a full prefill of this request's prompt saw."""
        doc = self.window.document_tokens
        cut = self.cut.cut_tokens if self.cut else 0
        return dict(fit="truncated" if cut else "fits", seen_fraction=seen_fraction(doc, doc - cut))


def progress_events(run: RunName, stage: Stage, steps: Steps):
    """Forward a Steps generator's (done, total) as Progress events; return its result."""
    return (yield from map_steps(steps, lambda done, total: Progress(run, stage, done, total)))


def request_stream(method):
    """Register a request's event generator in its engine's `_open_streams`, so that close() can close it."""

    @functools.wraps(method)
    def start(self, *args, **kwargs):
        events = method(self, *args, **kwargs)
        self._open_streams.add(events)
        return events

    return start


def close_streams(streams: Iterable[Iterator]) -> None:
    """Close suspended event streams; one running on another thread is left to end by its Cancel."""
    for events in list(streams):
        try:
            events.close()
        except ValueError:  # running on another thread: its Cancel ends it, then close() goes on
            pass


class Delegated:
    """An attribute kept by one of the engine's owners, read and set through the engine (tests and
    tools swap a loaded engine's caches and calibration)."""

    def __init__(self, owner: str, doc: str = ""):
        self.owner = owner
        self.__doc__ = doc

    def __set_name__(self, cls, name: str) -> None:
        self.name = name

    def __get__(self, engine, cls=None):
        return self if engine is None else getattr(getattr(engine, self.owner), self.name)

    def __set__(self, engine, value) -> None:
        setattr(getattr(engine, self.owner), self.name, value)
