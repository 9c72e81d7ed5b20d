"""Runner: the SpecPrefill and full-prefill runs' events, on the tiny pair, with owners of its own."""

from __future__ import annotations

import pytest

from engine.core.cancel import NEVER
from engine.core.events import Notice, RunFinished, SelectionMade, StageChanged, TokenGenerated
from engine.pipeline.draft_cache import DraftCaches
from engine.pipeline.prefix_cache import PrefixCaches
from engine.pipeline.run_policy import RunPolicy
from engine.pipeline.runs import Runner
from engine.pipeline.session import DocumentSession
from engine.pipeline.spec_run import draft_stage_text, spec_served_by
from engine.pipeline.state_store import StateStore
from tests.unit.owner_helpers import DOCUMENT, QUESTION, opened_prefix_context, settings


@pytest.fixture
def prefix_context(engine):
    yield from opened_prefix_context(engine)


@pytest.fixture
def runner(engine, prefix_context, tmp_path):
    prefixes = PrefixCaches(engine.info, StateStore(tmp_path / "states", 1 << 30), DraftCaches(1 << 30))
    return Runner(
        engine.runtime,
        engine.scorer,
        engine.info,
        RunPolicy(engine.info, engine.scorer),
        prefixes,
        prefix_context,
    )


def result(events):
    (finished,) = [e.result for e in events if isinstance(e, RunFinished)]
    return finished


def test_a_spec_run_shows_its_selection_before_the_targets_prefill(runner):
    events = list(runner.run("spec", DOCUMENT, QUESTION, settings(), NEVER))
    stages = [e.stage for e in events if isinstance(e, StageChanged)]
    assert stages == ["tokenizing", "draft", "select", "prefill", "generating", "done"]
    selection_at = next(i for i, e in enumerate(events) if isinstance(e, SelectionMade))
    prefill_at = next(i for i, e in enumerate(events) if isinstance(e, StageChanged) and e.stage == "prefill")
    assert selection_at < prefill_at
    done = result(events)
    assert done.run == "spec" and done.served_by == "" and 0 < done.kept_fraction < 1
    assert done.prefill_tokens < done.prompt_tokens
    assert done.generated_tokens == len([e for e in events if isinstance(e, TokenGenerated)])


def test_a_spec_run_below_the_threshold_runs_the_full_prefill_and_says_so(runner):
    events = list(runner.run("spec", DOCUMENT, QUESTION, settings(force=False, min_tokens=1 << 20), NEVER))
    assert any(isinstance(e, Notice) and e.message.startswith("bypassed:") for e in events)
    done = result(events)
    assert done.bypassed and done.positions == "contiguous" and done.prefill_tokens == done.prompt_tokens


def test_in_a_session_the_full_prefill_is_cold_then_cached_and_the_draft_is_reused(runner):
    session = DocumentSession(DOCUMENT)
    served = [
        result(runner.run(run, DOCUMENT, QUESTION, settings(), NEVER, session)).served_by
        for run in ("baseline", "baseline", "spec", "spec")
    ]
    assert served == ["cold_full", "cached_full", "spec", "spec_cached_draft"]


def test_the_cached_answer_is_the_cold_answer(runner):
    session = DocumentSession(DOCUMENT)
    cold = result(runner.run("baseline", DOCUMENT, QUESTION, settings(), NEVER, session))
    cached = result(runner.run("baseline", DOCUMENT, QUESTION, settings(), NEVER, session))
    assert cached.answer == cold.answer and cached.prefill_tokens < cold.prefill_tokens


def test_the_draft_stage_says_what_it_scores():
    assert draft_stage_text(100, None, 1) == "draft scoring 100 tokens"
    assert "in 3 segments" in draft_stage_text(100, None, 3)
    assert "; 2 of them from the draft cache" in draft_stage_text(100, None, 3, held=2)
    assert spec_served_by(None, 10) == ""
    assert spec_served_by(DocumentSession("x"), 0) == "spec"
    assert spec_served_by(DocumentSession("x"), 10) == "spec_cached_draft"
