"""The span path's draft caches and read-ahead, on a tiny target and a tiny draft of another vocabulary.

A draft of another family reads the prompt in its own tokens (span_selection.draft_prompt); its
cached keys are kept in them too, under a key that says so (DraftKey.tokens "draft"). The key
properties, as on the token path: the read-ahead reads what a cold SpecPrefill drafts (the first
question after it, `spec_read_ahead`, scores bit for bit as a cold run and keeps the same chunks),
a follow-up is `spec_cached_draft` with the cold scores, and a document longer than the draft's
window keeps its segments for follow-ups.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.events import ReadAheadEnded, RunFinished, SelectionMade, StageChanged
from engine.core.settings import ModelSettings
from engine.draft import segments
from engine.pipeline import DocumentSession, Engine
from engine.pipeline.draft_cache import DraftCaches, DraftKey
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.read_ahead import PLACEHOLDER_QUESTION
from engine.pipeline.span_selection import draft_prompt
from tests.fixtures.tiny_gguf import write_tiny_gguf_other_vocab
from tests.unit.test_long_documents import LONG_TEXT
from tests.unit.test_session_caches import QUESTIONS, settings

CHUNK = 16  # the draft's prefill chunk here: the tiny document's prefix takes several
# The draft's merges split nearly every character: this is about 250 of its tokens, one pass in its
# 512-token window with any of the questions.
DOCUMENT = " ".join(
    f"Shelf {i} holds the {['oak', 'pine', 'ash', 'elm'][i % 4]} box number {i * 3}." for i in range(7)
)


@pytest.fixture(scope="module")
def spans(pair, cache_home, tmp_path_factory):
    """The tiny target with a tiny draft whose merges differ: selection by character spans."""
    target, _draft = pair
    other = write_tiny_gguf_other_vocab(tmp_path_factory.mktemp("other") / "other-vocab.gguf")
    loaded = Engine.load(
        ModelSettings(target_path=target, draft_path=other, n_ctx=512, n_batch=64, n_threads=1)
    )
    assert loaded.info.selection == "spans"
    yield loaded
    loaded.close()


@pytest.fixture(autouse=True)
def fresh_cache(spans, monkeypatch):
    monkeypatch.setattr(spans, "draft_caches", DraftCaches(1 << 30))
    monkeypatch.setattr(spans.scorer, "prefill_chunk", CHUNK)


def ask(engine, session, question=QUESTIONS[0], **overrides):
    events = list(engine.ask(session, question, "spec", settings(**overrides)))
    (result,) = [e.result for e in events if isinstance(e, RunFinished)]
    (made,) = [e.selection for e in events if isinstance(e, SelectionMade)]
    stage = next(e.detail for e in events if isinstance(e, StageChanged) and e.stage == "draft")
    return result, made, stage


def cold(engine, question=QUESTIONS[0], text=DOCUMENT, **overrides):
    """A span-path SpecPrefill on a fresh session with an empty draft cache."""
    engine.draft_caches = DraftCaches(1 << 30)
    return ask(engine, DocumentSession(text), question, **overrides)


def draft_of(engine, question):
    """The prompt as the draft reads it, in its own template and tokens."""
    target = engine.prepare(DOCUMENT, question, settings())
    return draft_prompt(engine.info.draft_vocab, target, settings().system_prompt)


def same_scores(made, cold_made) -> None:
    np.testing.assert_array_equal(made.chunk_scores, cold_made.chunk_scores)  # bit for bit
    assert made.kept_chunks == cold_made.kept_chunks


def test_read_ahead_reads_the_draft_tokens_and_the_first_question_scores_as_cold(spans):
    cold_result, cold_made, _ = cold(spans)
    assert cold_result.selection == "spans" and cold_result.served_by == "spec"
    spans.draft_caches = DraftCaches(1 << 30)
    session = DocumentSession(DOCUMENT)
    *progress, ended = list(spans.read_ahead(session, settings()))
    assert isinstance(ended, ReadAheadEnded) and ended.status == "done", ended
    assert ended.done == ended.total > 3 * CHUNK and len(progress) > 3
    draft = draft_of(spans, PLACEHOLDER_QUESTION)
    assert ended.total == draft.tail_start  # the document's prefix in the draft's tokens
    assert spans.background_needed(session, settings())  # the target's full fill follows, in its tokens
    assert len(session.last_prefix[1]) == spans.prepare(DOCUMENT, QUESTIONS[0], settings()).tail_start

    result, made, stage = ask(spans, session)
    assert result.served_by == "spec_read_ahead" and result.read_ahead_s > 0
    assert result.selection == "spans" and "the document from the draft cache" in stage
    same_scores(made, cold_made)
    assert result.answer == cold_result.answer
    follow_up, _, _ = ask(spans, session, QUESTIONS[1])
    assert follow_up.served_by == "spec_cached_draft" and follow_up.read_ahead_s == 0.0
    assert [e.status for e in spans.read_ahead(session, settings())] == ["not_needed"]


def test_a_follow_up_reuses_the_draft_keys_and_scores_as_a_cold_run(spans):
    session = DocumentSession(DOCUMENT)
    assert ask(spans, session)[0].served_by == "spec"
    assert spans.background_needed(session, settings())  # the target's prefix, noted for its full fill
    follow_up, made, stage = ask(spans, session, QUESTIONS[1])
    assert follow_up.served_by == "spec_cached_draft" and "the document from the draft cache" in stage
    cold_result, cold_made, _ = cold(spans, QUESTIONS[1])
    same_scores(made, cold_made)
    assert follow_up.answer == cold_result.answer
    assert ask(spans, session, QUESTIONS[2], draft_window=32)[0].served_by == "spec"  # another window


def test_one_shot_span_runs_keep_nothing(spans):
    (result,) = [
        e.result
        for e in spans.stream(DOCUMENT, QUESTIONS[0], "spec", settings())
        if isinstance(e, RunFinished)
    ]
    assert result.served_by == "" and result.read_ahead_s == 0.0
    assert spans.draft_caches.total_bytes() == 0


def test_the_span_paths_draft_key_says_the_draft_tokens_and_holds_them(spans):
    session = DocumentSession(DOCUMENT)
    ask(spans, session)
    prefixes = PrefixCaches(spans.info)
    key = prefixes.draft_key(session, settings())
    assert key == DraftKey(prefixes.key(session, settings()), "draft")
    prompt, draft = spans.prepare(DOCUMENT, QUESTIONS[0], settings()), draft_of(spans, QUESTIONS[0])
    assert not np.array_equal(draft.tokens[: draft.tail_start], prompt.tokens[: prompt.tail_start])
    assert spans.draft_caches.holds(key, draft.tokens[: draft.tail_start], settings().draft_window)
    assert not spans.draft_caches.holds(  # the same tokens, read as the target's, are another slot
        DraftKey(key.prefix, "target"), draft.tokens[: draft.tail_start], settings().draft_window
    )
    spans.forget(session)
    assert spans.draft_caches.total_bytes() == 0


# -- a document longer than the draft's window: segments in the draft's tokens --------------------
@pytest.fixture
def segmented(spans, monkeypatch):
    """The tiny draft trained on 300 positions, so the long text takes segments."""
    monkeypatch.setattr(spans.scorer.model.config, "max_position_embeddings", 300)
    return spans


def long_settings(**overrides):
    return dict(keep=0.2, chunk_size=16, min_tokens=0, **overrides)


def test_a_long_documents_segments_are_kept_in_the_draft_tokens(segmented):
    session = DocumentSession(LONG_TEXT)
    first, _, first_stage = ask(segmented, session, **long_settings())
    assert first.served_by == "spec" and "segments" in first_stage
    assert first.fit == "selected"
    follow, made, stage = ask(segmented, session, "Which key opens door 35?", **long_settings())
    assert follow.served_by == "spec_cached_draft" and "from the draft cache" in stage
    _, cold_made, _ = cold(segmented, "Which key opens door 35?", LONG_TEXT, **long_settings())
    np.testing.assert_allclose(made.chunk_scores, cold_made.chunk_scores, rtol=1e-5, atol=1e-9)
    assert made.kept_chunks == cold_made.kept_chunks


def test_the_read_ahead_reads_a_long_documents_segments_and_the_first_question_scores_as_cold(
    spans, monkeypatch
):
    """The read-ahead plans the segments with a placeholder question; a real question of about its
    length gets the same ones (their tail room is rounded up, engine.draft.segments): here a window of
    2,500 positions with the room rounded to 64 tokens, so that the rounding is not capped."""
    monkeypatch.setattr(spans.scorer.model.config, "max_position_embeddings", 2500)
    monkeypatch.setattr(segments, "TAIL_ROOM_STEP", 64)
    monkeypatch.setattr(spans.scorer, "prefill_chunk", 256)
    segmented, question = spans, "Which key opens door 35?"
    _, cold_made, _ = cold(segmented, question, LONG_TEXT, **long_settings())
    segmented.draft_caches = DraftCaches(1 << 30)
    session = DocumentSession(LONG_TEXT)
    events = list(segmented.read_ahead(session, settings(**long_settings())))
    ended = [e for e in events if isinstance(e, ReadAheadEnded)]
    assert [e.status for e in ended] == ["done"] and ended[0].done == ended[0].total > 0
    assert len(events) > 2  # progress along the segments' chunks before the end
    result, made, stage = ask(segmented, session, question, **long_settings())
    assert result.served_by == "spec_read_ahead" and result.read_ahead_s > 0
    assert "3 segments" in stage and "3 of them from the draft cache" in stage
    np.testing.assert_allclose(made.chunk_scores, cold_made.chunk_scores, rtol=1e-5, atol=1e-9)
    assert made.kept_chunks == cold_made.kept_chunks
    again = list(segmented.read_ahead(session, settings(**long_settings())))
    assert [(e.status, e.detail) for e in again if isinstance(e, ReadAheadEnded)] == [
        ("not_needed", "the draft's cache holds the document already")
    ]
