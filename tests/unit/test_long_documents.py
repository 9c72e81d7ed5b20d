"""Documents longer than the target's window: fit by selection, the draft in segments, placements."""

from __future__ import annotations

import numpy as np
import pytest

from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled, ContextOverflowError
from engine.core.events import Notice, Progress, RunFinished, SelectionMade, StageChanged
from engine.core.settings import RunSettings
from engine.core.steps import run_to_end
from engine.draft.scorer import DraftScorer, ScoringParams
from engine.draft.segments import iter_score_segments, plan_segments, segment_tokens
from engine.draft.selection import plan_selection, select_chunks
from engine.pipeline.costmodel import CostModel, Quadratic
from engine.pipeline.draft_cache import DraftCaches
from engine.pipeline.fitting import WindowFit, seen_fraction
from engine.pipeline.kept_positions import compressed_positions, place_kept
from engine.pipeline.session import DocumentSession
from engine.pipeline.state_store import StateStore
from tests.unit.tiny_models import tiny_qwen2

MAX_NEW = 8
LONG_TEXT = " ".join(
    f"Line {i}: the {['amber', 'cobalt', 'jade', 'onyx'][i % 4]} key opens door {i * 7}." for i in range(160)
)
QUESTION = "Which key opens door 21?"


def long_settings(**overrides) -> RunSettings:
    values = dict(keep=0.2, chunk_size=16, max_new_tokens=MAX_NEW, min_tokens=0)
    values.update(overrides)
    return RunSettings(**values)


def result_of(events, run):
    results = [e.result for e in events if isinstance(e, RunFinished) and e.run == run]
    assert len(results) == 1
    return results[0]


# -- the arithmetic ----------------------------------------------------------------------
def test_window_fit_budget_keep_and_message():
    fit = WindowFit(prompt_tokens=212_400, document_tokens=212_350, n_ctx=32_768, max_new_tokens=256)
    assert not fit.fits and fit.budget == 32_512
    assert fit.keep_to_fit() == pytest.approx(32_512 / 212_400)
    assert fit.spec_keep(0.2) == pytest.approx(32_512 / 212_400)  # what fits is smaller than keep 0.2
    assert fit.spec_keep(0.1) == 0.1
    assert fit.describe_selection(0.14) == (
        "the document has 212,350 tokens, 6.5× the 32,768-token window; kept 14% to fit"
    )
    small = WindowFit(prompt_tokens=1000, document_tokens=900, n_ctx=32_768, max_new_tokens=256)
    assert small.fits and small.keep_to_fit() == 1.0 and small.spec_keep(0.3) == 0.3
    assert seen_fraction(200, 50) == 0.25 and seen_fraction(0, 0) == 1.0


def test_select_chunks_never_more_than_fit():
    scores = np.arange(20, dtype=np.float64)
    assert len(select_chunks(scores, 0.5, [0, 19])) == 10
    kept = select_chunks(scores, 0.5, [0, 19], max_chunks=4)
    assert kept == [0, 17, 18, 19]  # the protected ones, then the best scores, in document order
    assert select_chunks(scores, 0.5, [0, 1, 2, 19], max_chunks=2) == [0, 1, 2, 19]  # protection wins
    _, _, _, idx = plan_selection(np.ones(100), 8, 1.0, 96, max_tokens=40)
    assert len(idx) <= 40


@pytest.mark.parametrize("limit", [50, 120, 1000])
def test_compressed_positions_stay_in_order_and_below_the_limit(limit):
    kept = np.concatenate([np.arange(0, 16), np.arange(300, 316), np.arange(900, 932), np.arange(1990, 2000)])
    positions = compressed_positions(kept, limit)
    assert len(positions) == len(kept)
    assert np.all(np.diff(positions) >= 1)
    assert positions[-1] < max(limit, len(kept))
    # inside a kept run the spacing stays 1
    assert np.all(np.diff(positions[:16]) == 1) and np.all(np.diff(positions[16:32]) == 1)


def test_compress_is_restore_when_the_gaps_fit():
    kept = np.array([0, 1, 2, 10, 11, 40, 41])
    assert np.array_equal(compressed_positions(kept, 1000), kept)
    positions, next_position = place_kept(kept, 42, "compress", 1000)
    assert np.array_equal(positions, kept) and next_position == 42
    assert place_kept(kept, 42, "restore", 10)[1] == 42
    renumbered, nxt = place_kept(kept, 42, "renumber", 10)
    assert renumbered.tolist() == list(range(7)) and nxt == 7
    squeezed, nxt = place_kept(kept, 42, "compress", 12)
    assert squeezed[-1] < 12 and nxt == squeezed[-1] + 1


def test_plan_segments_cover_the_document_in_equal_slices():
    assert plan_segments(500, (20, 480), 600) == [(20, 480)]
    pieces = plan_segments(10_040, (20, 10_000), 3000)
    assert pieces[0][0] == 20 and pieces[-1][1] == 10_000
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:]))
    sizes = [b - a for a, b in pieces]
    assert max(sizes) - min(sizes) <= 1 and max(sizes) + 60 <= 3000
    with pytest.raises(ValueError, match="no room"):
        plan_segments(10_000, (20, 9990), 30)


def test_cost_model_estimates_a_prompt_longer_than_the_window():
    model = CostModel(
        target_prefill=Quadratic(0.0, 0.01, 0.0), draft=Quadratic(0.0, 0.001, 0.0), chunk_size=32
    )
    est = model.estimate(100_000, 0.5, 0, budget=30_000, pass_tokens=30_000)
    assert not est["fits"] and est["kept_tokens"] == 30_000
    assert est["baseline_ttft_s"] == pytest.approx(300.0)  # the cut full prefill: the window's worth
    assert est["draft_s"] == pytest.approx(100.0)  # four segments of 25,000
    assert model.estimate(1000, 0.5)["fits"]


# -- the draft in segments ---------------------------------------------------------------
@pytest.fixture(scope="module")
def scorer():
    return DraftScorer(tiny_qwen2(), eos_ids=set())


def test_segments_score_every_token_within_the_window(scorer):
    rng = np.random.default_rng(0)
    tokens = rng.integers(3, 90, size=700).tolist()
    span = (10, 690)
    params = ScoringParams(lookahead=2, kernel=3)
    steps = list_steps(iter_score_segments(scorer, tokens, span, pass_tokens=258, params=params))
    progress, result = steps
    assert result.segments == 3 and len(result.importance) == 700
    assert np.all(np.isfinite(result.importance)) and np.all(result.importance >= 0)
    assert [d for d, _ in progress] == sorted(d for d, _ in progress) and progress[-1][0] == progress[-1][1]
    # each slice holds its own segment's scores, scaled by the segment's length
    first = plan_segments(700, span, 258)[0]
    segment = segment_tokens(tokens, span, first)
    alone = scorer.score(segment, params)
    width = first[1] - first[0]
    np.testing.assert_allclose(
        result.importance[first[0] : first[1]], alone.importance[10 : 10 + width] * len(segment), rtol=1e-6
    )


def test_one_segment_is_the_plain_pass(scorer):
    tokens = list(range(5, 85)) * 3
    params = ScoringParams(lookahead=2, kernel=3)
    segmented = run_to_end(iter_score_segments(scorer, tokens, (4, 230), pass_tokens=400, params=params))
    plain = run_to_end(scorer.iter_score(tokens, params, split=230))  # split where the document ends
    assert segmented.segments == 1
    np.testing.assert_array_equal(segmented.importance, plain.importance)


def list_steps(steps):
    progress = []
    while True:
        try:
            progress.append(next(steps))
        except StopIteration as stop:
            return progress, stop.value


# -- the engine on a tiny pair (n_ctx 512) -----------------------------------------------------
@pytest.fixture(scope="module")
def long_text(engine):
    text = LONG_TEXT
    assert engine.count_tokens(text) > 2 * engine.info.n_ctx, "the test document must not fit the window"
    return text


def test_spec_fits_a_long_document_by_selection(engine, long_text):
    events = list(engine.stream(long_text, QUESTION, "spec", long_settings()))
    spec = result_of(events, "spec")
    window = engine.info.n_ctx - MAX_NEW
    assert spec.fit == "selected"
    assert spec.document_tokens > 2 * engine.info.n_ctx
    assert spec.prefill_tokens <= window
    assert spec.positions == "renumber"
    assert 0 < spec.seen_fraction < 1
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any("× the 512-token window; kept" in m for m in notices), notices


def test_spec_keep_below_what_fits_is_kept_as_asked(engine, long_text):
    spec = result_of(list(engine.stream(long_text, QUESTION, "spec", long_settings(keep=0.1))), "spec")
    assert spec.fit == "selected"
    assert spec.kept_fraction <= 0.1 + 32 / spec.prompt_tokens


def test_baseline_alone_still_refuses_and_both_truncates(engine, long_text):
    with pytest.raises(ContextOverflowError):
        list(engine.stream(long_text, QUESTION, "baseline", long_settings()))
    events = list(engine.stream(long_text, QUESTION, "both", long_settings()))
    base, spec = result_of(events, "baseline"), result_of(events, "spec")
    assert base.fit == "truncated" and base.truncated_tokens > 0
    assert base.seen_fraction == pytest.approx(1 - base.truncated_tokens / base.document_tokens)
    assert base.document_tokens == spec.document_tokens
    assert spec.fit == "selected"


def test_restore_asked_on_a_long_document_compresses(engine, long_text):
    events = list(engine.stream(long_text, QUESTION, "spec", long_settings(positions="restore")))
    assert result_of(events, "spec").positions == "compress"
    assert any("compressed" in e.message for e in events if isinstance(e, Notice))
    compressed = list(engine.stream(long_text, QUESTION, "spec", long_settings(positions="compress")))
    assert result_of(compressed, "spec").positions == "compress"
    assert not any("compressed" in e.message for e in compressed if isinstance(e, Notice))


def test_a_document_that_fits_is_labelled_fits(engine):
    text = " ".join(LONG_TEXT.split()[:60])
    events = list(engine.stream(text, QUESTION, "both", long_settings()))
    base, spec = result_of(events, "baseline"), result_of(events, "spec")
    assert base.fit == spec.fit == "fits" and base.seen_fraction == 1.0
    assert spec.positions == "restore"


def test_the_draft_reads_past_its_window_in_segments(engine, long_text, monkeypatch):
    monkeypatch.setattr(engine.scorer.model.config, "max_position_embeddings", 300)
    events = list(engine.stream(long_text, QUESTION, "spec", long_settings()))
    stages = [e.detail for e in events if isinstance(e, StageChanged) and e.stage == "draft"]
    assert "segments" in stages[0]
    assert result_of(events, "spec").fit == "selected"


def test_a_session_answers_a_long_document_by_specprefill(engine, long_text):
    session = DocumentSession(long_text)
    spec = result_of(list(engine.ask(session, QUESTION, "auto", long_settings())), "spec")
    assert spec.fit == "selected" and spec.served_by == "spec"
    assert not engine.background_needed(session, long_settings())  # the full prefix could never fit


def test_a_question_too_long_for_the_window_is_refused(engine, long_text):
    with pytest.raises(ContextOverflowError, match="shorten the question"):
        list(engine.stream(long_text, "why " * 600, "spec", long_settings()))


def test_cancel_stops_the_draft_between_segments(engine, long_text, monkeypatch):
    monkeypatch.setattr(engine.scorer.model.config, "max_position_embeddings", 300)
    cancel, seen = CancelToken(), []
    with pytest.raises(Cancelled):
        for event in engine.stream(long_text, QUESTION, "spec", long_settings(), cancel):
            if isinstance(event, Progress) and event.stage == "draft":
                seen.append(event.done)
                cancel.cancel()
    assert len(seen) == 1  # nothing after the Cancel: the next segment never started
    follow = result_of(list(engine.stream(long_text, QUESTION, "spec", long_settings())), "spec")
    assert follow.fit == "selected"  # the engine is free again


# -- follow-ups on a long document: the draft's segments from the cache ---------------------------
def test_in_a_session_questions_of_about_one_length_get_the_same_segments():
    span = (20, 63_760)  # the questions' tails: 40 and 180 tokens
    assert len(plan_segments(63_800, span, 32_000)) != len(
        plan_segments(63_940, span, 32_000)
    )  # one-shot runs
    shorter, longer = (plan_segments(n, span, 32_000, follow_ups=True) for n in (63_800, 63_940))
    assert shorter == longer and len(shorter) == 3


def spec_with_selection(engine, session, question):
    events = list(engine.ask(session, question, "spec", long_settings()))
    (made,) = [e.selection for e in events if isinstance(e, SelectionMade)]
    stage = [e.detail for e in events if isinstance(e, StageChanged) and e.stage == "draft"][0]
    return result_of(events, "spec"), made, stage, [e.message for e in events if isinstance(e, Notice)]


@pytest.fixture
def segmented(engine, monkeypatch):
    """The tiny draft trained on 300 positions (so the long text takes segments), a fresh draft cache."""
    monkeypatch.setattr(engine.scorer.model.config, "max_position_embeddings", 300)
    monkeypatch.setattr(engine, "draft_caches", DraftCaches(1 << 30))
    return engine


def test_a_follow_up_on_a_long_document_scores_its_segments_from_the_cache_as_cold(segmented, long_text):
    first, _, first_stage, _ = spec_with_selection(segmented, DocumentSession(long_text), QUESTION)
    assert first.served_by == "spec" and "segments" in first_stage
    session = DocumentSession(long_text)
    follow, follow_made, stage, _ = spec_with_selection(segmented, session, "Which key opens door 35?")
    assert follow.served_by == "spec_cached_draft" and "from the draft cache" in stage
    segmented.draft_caches = DraftCaches(1 << 30)  # the same question, cold
    cold, cold_made, _, _ = spec_with_selection(
        segmented, DocumentSession(long_text), "Which key opens door 35?"
    )
    assert cold.served_by == "spec"
    np.testing.assert_allclose(follow_made.chunk_scores, cold_made.chunk_scores, rtol=1e-5, atol=1e-9)
    assert follow_made.kept_chunks == cold_made.kept_chunks and follow.answer == cold.answer


def test_a_draft_cache_smaller_than_the_segments_keeps_some_and_says_so(segmented, long_text):
    spec_with_selection(segmented, DocumentSession(long_text), QUESTION)
    sizes = [entry.nbytes() for entry in segmented.draft_caches._entries.values()]
    assert len(sizes) >= 3
    segmented.draft_caches = DraftCaches(max(sizes) + 1)  # room for one segment
    _, _, _, notices = spec_with_selection(segmented, DocumentSession(long_text), QUESTION)
    assert any(f"keeps the draft's keys for 1 of this document's {len(sizes)} segments" in m for m in notices)
    follow, _, stage, _ = spec_with_selection(segmented, DocumentSession(long_text), QUESTION)
    assert follow.served_by == "spec_cached_draft" and "1 of them from the draft cache" in stage


def test_a_cut_full_prefill_in_a_session_serves_questions_of_another_length_from_the_cache(
    engine, long_text, monkeypatch, tmp_path
):
    """A longer question cuts the document a little shorter: the prefix context holding the longer
    cut serves it, and a shorter question extends what is held. A cut prefix is not saved to disk:
    a question of another length would cut the document elsewhere."""
    monkeypatch.setattr(engine, "state_store", StateStore(tmp_path / "states", 1 << 30))
    session, cut = DocumentSession(long_text), long_settings(truncate=True)
    longer_question = "Which key opens door 21, and which door does the jade key open after it?"

    def baseline(question):
        return result_of(list(engine.ask(session, question, "baseline", cut)), "baseline")

    first = baseline(longer_question)
    extended = baseline(QUESTION)  # a shorter question: more of the document fits
    again = baseline(longer_question)
    assert first.fit == extended.fit == again.fit == "truncated"
    assert extended.truncated_tokens < first.truncated_tokens
    assert (first.served_by, again.served_by) == ("cold_full", "cached_full")
    assert again.prefill_tokens < first.prefill_tokens  # the question only
    assert again.answer == first.answer
    assert extended.served_by == "cached_full"  # most of it was held: not a cold prefill
    assert not engine.state_store.has(engine._prefix_key(session, cut))


def test_the_calibration_knows_the_windows_an_estimate_past_them_needs():
    model = CostModel(
        target_prefill=Quadratic(0.0, 0.01, 0.0),
        draft=Quadratic(0.0, 0.001, 0.0),
        chunk_size=32,
        machine={"n_ctx": 32_768, "draft_trained_window": 32_768},
    )
    budget, pass_tokens = model.window_limits(256, 8)
    assert (budget, pass_tokens) == (32_512, 32_760)
    est = model.estimate(98_304, 0.2, 0, budget, pass_tokens)
    assert not est["fits"] and est["draft_s"] == pytest.approx(98.304)  # four segments of 24,576
    assert est["baseline_ttft_s"] == pytest.approx(325.12)  # the cut full prefill
    older = CostModel(target_prefill=Quadratic(0.0, 0.01, 0.0), draft=Quadratic(0.0, 0.001, 0.0))
    assert older.window_limits(256, 8) == (None, None)  # a file from before: the plain estimate
