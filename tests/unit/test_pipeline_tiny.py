"""The whole pipeline (Engine.load, Engine.stream) on a tiny random target/draft GGUF pair."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled, ContextOverflowError, ModelError, SettingsError
from engine.core.events import Notice, Progress, RunFinished, SelectionMade, StageChanged, TokenGenerated
from engine.core.settings import DEFAULT_MIN_TOKENS, ModelSettings, RunSettings
from engine.draft.loader import dequantized_dir
from engine.pipeline import Engine
from engine.pipeline.costmodel import CostModel, Quadratic
from tests.fixtures.tiny_gguf import write_tiny_gguf_other_vocab

DOCUMENT = " ".join(
    f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(8)
)
QUESTION = "Which item is the green stone?"
STAGE_ORDER = ["tokenizing", "draft", "select", "prefill", "generating", "done"]
MAX_NEW = 6


def spec_settings(**overrides) -> RunSettings:
    values = dict(force=True, keep=0.25, chunk_size=8, max_new_tokens=MAX_NEW)
    values.update(overrides)
    return RunSettings(**values)


@pytest.fixture
def recorder(engine, monkeypatch):
    """Records what the target is asked to prefill and where generation starts."""
    calls = {"prefill": [], "generate": []}
    iter_prefill, generate = engine.runtime.iter_prefill, engine.runtime.generate

    def spy_prefill(tokens, positions, cancel, split=0):
        calls["prefill"].append((np.array(tokens), np.array(positions)))
        return (yield from iter_prefill(tokens, positions, cancel, split))

    def spy_generate(first_logits, next_position, max_new_tokens, cancel, **sampling):
        calls["generate"].append(next_position)
        return generate(first_logits, next_position, max_new_tokens, cancel, **sampling)

    monkeypatch.setattr(engine.runtime, "iter_prefill", spy_prefill)
    monkeypatch.setattr(engine.runtime, "generate", spy_generate)
    return calls


def finished(events, run):
    results = [e.result for e in events if isinstance(e, RunFinished) and e.run == run]
    assert len(results) == 1
    return results[0]


def selection_of(events):
    made = [e.selection for e in events if isinstance(e, SelectionMade)]
    assert len(made) == 1
    return made[0]


def check_run_order(events, run, stages):
    """Stages in order; Progress inside its stage and monotonic; tokens while generating; RunFinished last."""
    mine = [e for e in events if getattr(e, "run", None) == run]
    assert isinstance(mine[-1], RunFinished)
    seen_stages = [e.stage for e in mine if isinstance(e, StageChanged)]
    assert seen_stages == stages
    current, last_done, token_index = None, {}, 0
    for event in mine[:-1]:
        if isinstance(event, StageChanged):
            current = event.stage
        elif isinstance(event, Progress):
            assert event.stage == current
            assert 0 < event.done <= event.total
            assert event.done > last_done.get(event.stage, 0)
            last_done[event.stage] = event.done
        elif isinstance(event, TokenGenerated):
            assert current == "generating"
            assert event.index == token_index
            token_index += 1
        elif isinstance(event, SelectionMade):
            assert current == "select"  # before the target's prefill, so the app can show it meanwhile
    result = mine[-1].result
    assert token_index == result.generated_tokens
    return mine


# -- loading ------------------------------------------------------------------------


def test_engine_loads_both_models(engine, pair, cache_home):
    target, draft = pair
    info = engine.info
    assert info.target_name == target.name and info.draft_name == draft.name
    assert info.positions_supported is True
    assert info.n_ctx == 512
    assert info.device == "cpu"
    assert info.draft_memory_bytes > 0
    # The dequantized draft went into the cache dir XDG_CACHE_HOME points at.
    cached = dequantized_dir(draft)
    assert cached.is_relative_to(cache_home)
    assert (cached / "config.json").is_file()
    assert engine.scorer.eos_ids, "the draft's end-of-turn id is known"


def test_a_draft_with_another_vocabulary_selects_through_character_spans(
    pair, cache_home, tmp_path, monkeypatch
):
    monkeypatch.delenv("SPECPREFILL_DRAFT_PRECISION")  # its format is measured, as a user's is
    target, _draft = pair
    other = write_tiny_gguf_other_vocab(tmp_path / "other-vocab.gguf")
    engine = Engine.load(
        ModelSettings(target_path=target, draft_path=other, n_ctx=512, n_batch=64, n_threads=1)
    )
    try:
        assert engine.info.selection == "spans"
        events = list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings()))
        result = finished(events, "spec")
        assert result.selection == "spans" and 0 < result.kept_fraction <= 1
        # The draft's format is measured on this CPU, then named in the engine's info and the result.
        assert engine.info.draft_precision in ("int8", "bf16", "fp32")
        assert engine.info.draft_precision_reason.startswith("measured on this CPU: ")
        assert result.draft_precision == engine.info.draft_precision
        assert result.to_json()["draft_precision"] == engine.info.draft_precision
        assert result.prefill_tokens == round(result.kept_fraction * result.prompt_tokens)
    finally:
        engine.close()


def test_a_missing_model_is_a_model_error(pair, cache_home, tmp_path):
    target, _draft = pair
    with pytest.raises(ModelError, match="draft model not found"):
        Engine.load(ModelSettings(target_path=target, draft_path=tmp_path / "nope.gguf", n_threads=1))


# -- both runs ------------------------------------------------------------------------


def test_both_mode_streams_baseline_then_spec_in_order(engine, recorder):
    events = list(engine.stream(DOCUMENT, QUESTION, "both", spec_settings()))
    runs = [e.run for e in events]
    first_spec = runs.index("spec")
    assert set(runs[:first_spec]) == {"baseline"} and set(runs[first_spec:]) == {"spec"}

    baseline_events = check_run_order(events, "baseline", ["tokenizing", "prefill", "generating", "done"])
    spec_events = check_run_order(events, "spec", STAGE_ORDER)
    assert not any(isinstance(e, SelectionMade) for e in baseline_events)
    assert any(isinstance(e, Progress) and e.stage == "draft" for e in spec_events)
    made = next(i for i, e in enumerate(spec_events) if isinstance(e, SelectionMade))
    prefill = next(
        i for i, e in enumerate(spec_events) if isinstance(e, StageChanged) and e.stage == "prefill"
    )
    assert made < prefill
    for run_events in (baseline_events, spec_events):
        prefill = [e for e in run_events if isinstance(e, Progress) and e.stage == "prefill"]
        assert prefill and prefill[-1].done == prefill[-1].total

    baseline, spec = finished(events, "baseline"), finished(events, "spec")
    assert baseline.prompt_tokens == spec.prompt_tokens > 200
    assert baseline.prefill_tokens == baseline.prompt_tokens
    assert baseline.positions == "contiguous" and not baseline.bypassed
    assert spec.prefill_tokens < spec.prompt_tokens
    assert baseline.generated_tokens == spec.generated_tokens == MAX_NEW
    assert baseline.stop_reason == spec.stop_reason == "max_new_tokens"
    assert baseline.ttft_s > 0 and spec.ttft_s > 0 and spec.draft_s > 0
    streamed = "".join(e.text for e in events if isinstance(e, TokenGenerated) and e.run == "baseline")
    assert baseline.answer == streamed.strip()

    # The baseline prefilled every prompt token at contiguous positions, then generated after them.
    (b_tokens, b_positions), (s_tokens, s_positions) = recorder["prefill"]
    assert len(b_tokens) == baseline.prompt_tokens
    np.testing.assert_array_equal(b_positions, np.arange(baseline.prompt_tokens))
    assert recorder["generate"][0] == baseline.prompt_tokens
    assert len(s_tokens) == spec.prefill_tokens


def test_spec_keeps_the_asked_fraction_in_chunks(engine):
    settings = spec_settings()
    events = list(engine.stream(DOCUMENT, QUESTION, "spec", settings))
    result, selection = finished(events, "spec"), selection_of(events)
    n = result.prompt_tokens
    n_chunks = math.ceil(n / settings.chunk_size)
    assert selection.chunk_size == settings.chunk_size
    assert selection.chunk_starts == list(range(0, n, settings.chunk_size))
    assert len(selection.chunk_scores) == n_chunks
    assert len(selection.kept_chunks) == max(
        math.ceil(settings.keep * n_chunks), len(selection.protected_chunks)
    )
    assert selection.kept_chunks == sorted(set(selection.kept_chunks))

    kept_tokens = sum(min(settings.chunk_size, n - selection.chunk_starts[c]) for c in selection.kept_chunks)
    assert result.prefill_tokens == kept_tokens
    assert result.kept_fraction == pytest.approx(kept_tokens / n)
    assert abs(result.kept_fraction - settings.keep) <= settings.chunk_size / n
    assert not result.bypassed and result.bypass_reason == ""


def test_the_protected_head_and_question_tail_are_always_kept(engine):
    # keep=0.05 asks for fewer chunks than are protected: the protected ones still win.
    for keep in (0.05, 0.25):
        events = list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings(keep=keep)))
        selection = selection_of(events)
        n_chunks = len(selection.chunk_starts)
        assert 0 in selection.kept_chunks and n_chunks - 1 in selection.kept_chunks
        assert set(selection.protected_chunks) <= set(selection.kept_chunks)
        # Every token of the question tail (after the document's text) sits in a kept chunk.
        doc_end = selection.doc_char_span[1]
        tail_tokens = [i for i, off in enumerate(selection.token_char_offsets) if off >= doc_end]
        assert tail_tokens
        assert {i // selection.chunk_size for i in tail_tokens} <= set(selection.kept_chunks)
    assert set(selection.kept_chunks) > set(selection.protected_chunks)  # keep=0.25 adds document chunks


def test_auto_positions_restore_the_original_positions(engine, recorder):
    settings = spec_settings(positions="auto")
    events = list(engine.stream(DOCUMENT, QUESTION, "spec", settings))
    result, selection = finished(events, "spec"), selection_of(events)
    assert engine.resolve_positions("auto") == "restore"
    assert result.positions == "restore"

    prompt = engine.prepare(DOCUMENT, QUESTION, settings)
    kept_idx = np.concatenate(
        [
            np.arange(s, min(s + settings.chunk_size, prompt.n_tokens))
            for s in (selection.chunk_starts[c] for c in selection.kept_chunks)
        ]
    )
    [(tokens, positions)] = recorder["prefill"]
    np.testing.assert_array_equal(positions, kept_idx)
    np.testing.assert_array_equal(tokens, prompt.tokens[kept_idx])
    assert np.any(np.diff(positions) > 1), "the kept tokens have gaps between them"
    assert recorder["generate"] == [prompt.n_tokens]


def test_renumber_positions_are_contiguous(engine, recorder):
    events = list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings(positions="renumber")))
    result = finished(events, "spec")
    assert result.positions == "renumber"
    [(tokens, positions)] = recorder["prefill"]
    assert len(tokens) == result.prefill_tokens < result.prompt_tokens
    np.testing.assert_array_equal(positions, np.arange(result.prefill_tokens))
    assert recorder["generate"] == [result.prefill_tokens]
    assert result.generated_tokens == MAX_NEW


def test_restore_and_renumber_prefill_the_same_tokens(engine, recorder):
    list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings(positions="restore")))
    list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings(positions="renumber")))
    (restore_tokens, restore_pos), (renumber_tokens, renumber_pos) = recorder["prefill"]
    np.testing.assert_array_equal(restore_tokens, renumber_tokens)
    assert not np.array_equal(restore_pos, renumber_pos)


def test_runs_are_deterministic(engine):
    first = list(engine.stream(DOCUMENT, QUESTION, "both", spec_settings()))
    second = list(engine.stream(DOCUMENT, QUESTION, "both", spec_settings()))
    for run in ("baseline", "spec"):
        assert finished(first, run).answer == finished(second, run).answer
    assert selection_of(first).kept_chunks == selection_of(second).kept_chunks


def test_below_min_tokens_the_spec_run_is_bypassed(engine):
    assert engine.cost_model is None  # not calibrated: the fixed threshold applies
    settings = RunSettings(max_new_tokens=MAX_NEW)  # min_tokens unset, force off
    events = list(engine.stream(DOCUMENT, QUESTION, "spec", settings))
    result = finished(events, "spec")
    assert result.prompt_tokens < DEFAULT_MIN_TOKENS
    assert result.bypassed is True
    assert str(DEFAULT_MIN_TOKENS) in result.bypass_reason
    assert result.prefill_tokens == result.prompt_tokens
    assert result.kept_fraction == 1.0
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and notices[0].run == "spec" and "bypass" in notices[0].message
    assert not any(isinstance(e, SelectionMade) for e in events)
    assert not any(isinstance(e, StageChanged) and e.stage == "draft" for e in events)


def test_calibrated_prediction_replaces_the_fixed_threshold(engine, monkeypatch):
    n = 300  # with the answer's room (max new tokens 16) it fits the 512-token window
    slow_target = CostModel(target_prefill=Quadratic(0, 1.0, 0), draft=Quadratic(0, 0.01, 0))
    slow_draft = CostModel(target_prefill=Quadratic(0, 0.01, 0), draft=Quadratic(0, 1.0, 0))
    settings = RunSettings(max_new_tokens=16, keep=0.2)
    monkeypatch.setattr(engine, "cost_model", slow_target)
    assert engine.bypass_reason(n, settings) == ""  # SpecPrefill predicted to win, below 4096 too
    assert engine.estimate(n, RunSettings(max_new_tokens=16, keep=0.2))["speedup"] > 1
    monkeypatch.setattr(engine, "cost_model", slow_draft)
    assert "predicted" in engine.bypass_reason(n, settings)
    assert engine.bypass_reason(n, RunSettings(max_new_tokens=16, keep=0.2, force=True)) == ""
    timed_from_1024 = CostModel(
        target_prefill=Quadratic(0, 1.0, 0),
        draft=Quadratic(0, 0.01, 0),
        measurements={"draft": {"1024": 10.0}, "target": {"1024": 1000.0}},
    )
    monkeypatch.setattr(engine, "cost_model", timed_from_1024)
    assert "shortest prompt this machine was calibrated at" in engine.bypass_reason(n, settings)
    # a threshold the user sets wins over the prediction
    assert engine.bypass_reason(n, RunSettings(max_new_tokens=16, keep=0.2, min_tokens=100)) == ""


def test_a_prompt_longer_than_the_window_is_never_bypassed(engine):
    settings = RunSettings(keep=0.2, min_tokens=4096, max_new_tokens=256)
    assert engine.bypass_reason(300, settings) == ""  # 300 + 256 > 512: only SpecPrefill's selection fits it
    assert "threshold" in engine.bypass_reason(200, settings)


# -- failures --------------------------------------------------------------------------


def test_a_prompt_longer_than_the_context_is_refused_with_the_numbers(engine):
    """A full prefill alone is refused (a compare cuts it, SpecPrefill selects: test_long_documents)."""
    long_document = DOCUMENT * 4
    settings = spec_settings()
    n = engine.prepare(long_document, QUESTION, settings).n_tokens
    assert n > 512
    with pytest.raises(ContextOverflowError) as err:
        list(engine.stream(long_document, QUESTION, "baseline", settings))
    message = str(err.value)
    assert f"{n} tokens" in message
    assert str(n + MAX_NEW) in message
    assert "512" in message


def test_room_for_the_answer_counts_against_the_context(engine):
    n = engine.prepare(DOCUMENT, QUESTION, spec_settings()).n_tokens
    with pytest.raises(ContextOverflowError, match=str(n)):
        list(engine.stream(DOCUMENT, QUESTION, "baseline", spec_settings(max_new_tokens=512 - n + 1)))
    fits = list(engine.stream(DOCUMENT, QUESTION, "baseline", spec_settings(max_new_tokens=512 - n)))
    assert finished(fits, "baseline").prompt_tokens == n


def test_an_empty_question_is_refused(engine):
    with pytest.raises(ValueError):
        list(engine.stream(DOCUMENT, "   ", "both", spec_settings()))


def test_a_first_scored_layer_past_the_draft_is_refused_before_any_run(engine):
    events, settings = [], spec_settings(first_scored_layer=engine.scorer.n_layers)
    with pytest.raises(SettingsError, match="not a layer of the draft"):
        events.extend(engine.stream(DOCUMENT, QUESTION, "both", settings))
    assert events == []  # not even the full prefill ran


def test_a_later_first_scored_layer_scores_the_same_chunks_differently(engine):
    every = selection_of(list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings())))
    later = selection_of(
        list(
            engine.stream(
                DOCUMENT, QUESTION, "spec", spec_settings(first_scored_layer=engine.scorer.n_layers - 1)
            )
        )
    )
    assert len(later.chunk_scores) == len(every.chunk_scores)
    assert len(later.kept_chunks) == len(every.kept_chunks)
    assert not np.allclose(later.chunk_scores, every.chunk_scores)


def test_scoring_with_the_question_changes_the_scores_of_the_same_chunks(engine):
    plain = selection_of(list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings(score_question=False))))
    asked = selection_of(list(engine.stream(DOCUMENT, QUESTION, "spec", spec_settings())))
    assert len(asked.chunk_scores) == len(plain.chunk_scores)
    assert len(asked.kept_chunks) == len(plain.kept_chunks)
    assert not np.allclose(asked.chunk_scores, plain.chunk_scores)


def events_until_cancelled(engine, mode: str, stage: str) -> list:
    """The events of a run cancelled at its first progress in `stage`; the run must end Cancelled."""
    token = CancelToken()
    seen = []
    with pytest.raises(Cancelled):
        for event in engine.stream(DOCUMENT, QUESTION, mode, spec_settings(), cancel=token):
            seen.append(event)
            if isinstance(event, Progress) and event.stage == stage:
                token.cancel()
    return seen


def test_cancel_during_draft_scoring_then_the_next_run_works(engine):
    seen = events_until_cancelled(engine, "spec", "draft")
    assert any(isinstance(e, Progress) and e.stage == "draft" for e in seen)
    assert not any(isinstance(e, (TokenGenerated, RunFinished, SelectionMade)) for e in seen)
    assert not any(isinstance(e, StageChanged) and e.stage == "prefill" for e in seen)

    events = list(engine.stream(DOCUMENT, QUESTION, "both", spec_settings()))
    assert finished(events, "spec").generated_tokens == MAX_NEW
    assert finished(events, "baseline").generated_tokens == MAX_NEW


def test_a_spec_run_cancelled_during_its_prefill_has_already_reported_its_selection(engine):
    seen = events_until_cancelled(engine, "spec", "prefill")
    selection = selection_of(seen)
    n_tokens = engine.prepare(DOCUMENT, QUESTION, spec_settings()).n_tokens
    assert selection.kept_chunks and len(selection.token_char_offsets) == n_tokens
    assert not any(isinstance(e, (TokenGenerated, RunFinished)) for e in seen)


def test_cancel_during_target_prefill(engine):
    seen = events_until_cancelled(engine, "baseline", "prefill")
    assert any(isinstance(e, Progress) and e.stage == "prefill" for e in seen)
    events = list(engine.stream(DOCUMENT, QUESTION, "baseline", spec_settings()))
    assert finished(events, "baseline").generated_tokens == MAX_NEW
