"""A document session end to end on the real default models (a ~600-token excerpt): SpecPrefill,
a follow-up with the cached draft, the background full prefill, a follow-up from the full cached
document and a reopening from the saved state; the cached answers are the cold answer, exactly."""

import pytest

from engine.core.events import BackgroundEnded, RunFinished
from engine.core.settings import RunSettings
from engine.pipeline import DocumentSession, Engine
from engine.pipeline.state_store import StateStore
from tests.integration.conftest import short_faq_excerpt

pytestmark = pytest.mark.real_models
QUESTION = "Where is the zlib documentation (man pages, etc.)? Name the file."
FOLLOW_UP = "Which file holds the zlib documentation?"
FACT = "zlib.h"


def result_of(events):
    (result,) = [e.result for e in events if isinstance(e, RunFinished)]
    return result


def count_draft_prefill(engine) -> list[int]:
    """The sizes of the prompt chunks the draft prefills from now on (the draft's work, not its time)."""
    sizes, prefill_chunk = [], engine.scorer._prefill_chunk

    def counting(chunk, start, cache):
        sizes.append(len(chunk))
        return prefill_chunk(chunk, start, cache)

    engine.scorer._prefill_chunk = counting
    return sizes


def test_a_session_serves_each_path_and_the_cached_answers_are_the_cold_one(real_models_ready, tmp_path):
    settings = RunSettings(keep=0.5, force=True, max_new_tokens=40)
    text = short_faq_excerpt()
    engine = Engine.load()
    try:
        engine.state_store = StateStore(tmp_path / "states", 1 << 30)  # never the user's saved states
        session = DocumentSession(text)
        draft_prefill = count_draft_prefill(engine)
        first = result_of(engine.ask(session, QUESTION, "auto", settings))
        first_prefill = sum(draft_prefill)
        draft_prefill.clear()
        follow_up = result_of(engine.ask(session, FOLLOW_UP, "auto", settings))
        follow_up_prefill = sum(draft_prefill)
        fill = list(engine.background_prefill(session, settings))
        cached = result_of(engine.ask(session, QUESTION, "auto", settings))
        cold = result_of(engine.stream(text, QUESTION, "baseline", settings))
        reopened_session = DocumentSession(text)
        reopened = result_of(engine.ask(reopened_session, QUESTION, "auto", settings))
    finally:
        engine.close()
    assert (first.served_by, follow_up.served_by) == ("spec", "spec_cached_draft")
    # The follow-up's draft prefilled its question only: the document's keys came from the cache.
    assert first_prefill > first.document_tokens and follow_up_prefill < 64, (
        first_prefill,
        follow_up_prefill,
    )
    assert isinstance(fill[-1], BackgroundEnded) and fill[-1].status == "done", fill[-1]
    assert (cached.served_by, reopened.served_by) == ("cached_full", "saved_state")
    assert FACT in cold.answer, cold.answer
    assert cached.answer == cold.answer and reopened.answer == cold.answer
    assert cached.prefill_tokens < 40 < cold.prefill_tokens
