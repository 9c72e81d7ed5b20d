"""Shared by the tests of the engine's owners (prefix caches, background fill, runs): a document of
several 64-token batches and the owners built from the tiny engine's public parts."""

from __future__ import annotations

from engine.core.settings import RunSettings
from engine.pipeline.prefix_context import PrefixContext
from engine.pipeline.session import DocumentSession

DOCUMENT = " ".join(
    f"Shelf {i} holds the {['oak', 'pine', 'ash', 'elm'][i % 4]} box number {i * 3}." for i in range(11)
)
QUESTION = "Which shelf holds box 27?"


def settings(**overrides) -> RunSettings:
    values = dict(keep=0.25, chunk_size=8, max_new_tokens=8, force=True)
    values.update(overrides)
    return RunSettings(**values)


def drain(events):
    """A generator's events and its return value."""
    seen = []
    while True:
        try:
            seen.append(next(events))
        except StopIteration as stop:
            return seen, stop.value


def noted_session(engine, prefixes, run_settings: RunSettings) -> tuple[DocumentSession, object, object]:
    """A session whose latest question's prefix is noted, as after a SpecPrefill answer."""
    session = DocumentSession(DOCUMENT)
    prompt = engine.prepare(DOCUMENT, QUESTION, run_settings)
    key, prefix = prefixes.key(session, run_settings), prompt.tokens[: prompt.tail_start]
    session.note_prefix(key, prefix)
    return session, key, prefix


def opened_prefix_context(engine):
    """A prefix context of its own over the tiny engine's runtime, closed after the test."""
    context = PrefixContext(engine.runtime, engine.info.target_memory_device)
    yield context
    context.close()
