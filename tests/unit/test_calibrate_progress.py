"""Calibration as the app runs it: progress before each timing, Cancel, and storing only a whole calibration."""

from __future__ import annotations

import dataclasses

import pytest

from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled
from engine.core.settings import TIMED_QUESTION_ROWS, ModelSettings, RunSettings
from engine.eval.calibrate import calibrate_machine, plan, step_message
from engine.pipeline import costmodel

TEXT = "The quick brown fox jumps over the lazy dog. " * 40
LENGTHS = [64, 128, 256]  # the tiny engine's context is 512


@pytest.fixture
def uncalibrated(engine):
    """The module's engine without a cost model, as after a load on an uncalibrated machine."""
    engine.cost_model = None
    yield engine
    engine.cost_model = None


def test_plan_and_messages_name_each_timing_in_order():
    steps = plan(LENGTHS)
    assert steps == [
        ("target", 64),
        ("draft", 64),
        ("target", 128),
        ("draft", 128),
        ("target", 256),
        ("draft", 256),
    ]
    assert step_message(steps, 0) == "timing the target's prefill of 64 tokens (1 of 6)"
    assert step_message(steps, 5) == "timing the draft's scoring of 256 tokens (6 of 6)"
    assert step_message(steps, 6) == "fitting the cost model"


def test_progress_is_monotonic_and_the_whole_calibration_is_stored(uncalibrated, tmp_path):
    path = tmp_path / "calibration.json"
    reports, measured = [], []
    settings = ModelSettings(draft_quant="none", n_threads=1)
    model = calibrate_machine(
        uncalibrated,
        settings,
        lambda *report: reports.append(report),
        text=TEXT,
        lengths=LENGTHS,
        path=path,
        on_measurement=measured.append,
    )
    total = 2 * sum(LENGTHS)
    assert {t for _, t, _ in reports} == {total}
    dones = [done for done, _, _ in reports]
    assert dones == sorted(dones) and dones[0] == 0 and dones[-1] == total
    messages = list(dict.fromkeys(message for _, _, message in reports))
    assert messages == [
        step_message(plan(LENGTHS), i) for i in range(7)
    ]  # each of the 6 timings, then the fit
    assert len(reports) > 7  # the bar also moves within a timing, batch by batch
    assert reports[0][2] == "timing the target's prefill of 64 tokens (1 of 6)"
    assert reports[-1][2] == "fitting the cost model"
    assert [(m.role, m.tokens) for m in measured] == plan(LENGTHS)
    stored = costmodel.load(path)
    assert stored.to_json() == model.to_json()
    assert stored.machine["draft_quant"] == "none" and stored.machine["threads"] == 1
    assert costmodel.load_matching(uncalibrated.info, path) is not None  # the engine's models, its device
    # Timed with flash attention off (auto on the CPU): rates measured with it on no longer apply.
    assert stored.machine["flash_attn"] == uncalibrated.info.flash_attn == "off"
    other = dataclasses.replace(uncalibrated.info, flash_attn="on")
    assert costmodel.load_matching(other, path) is None
    assert uncalibrated.cost_model is model  # predictions use it at once


def test_cancel_midway_raises_and_stores_nothing(uncalibrated, tmp_path):
    path = tmp_path / "calibration.json"
    cancel, measured = CancelToken(), []

    def cancel_at_the_third_timing(done: int, total: int, message: str) -> None:
        if "(3 of 6)" in message:
            cancel.cancel()

    with pytest.raises(Cancelled):
        calibrate_machine(
            uncalibrated,
            None,
            cancel_at_the_third_timing,
            cancel,
            text=TEXT,
            lengths=LENGTHS,
            path=path,
            on_measurement=measured.append,
        )
    assert len(measured) == 2  # the third timing never ran
    assert not path.exists()
    assert uncalibrated.cost_model is None


def test_a_cancel_during_the_last_timing_stores_nothing(uncalibrated, tmp_path, monkeypatch):
    """The last timing may end just as Cancel is pressed: the result is dropped all the same."""
    path = tmp_path / "calibration.json"
    cancel, time_draft = CancelToken(), uncalibrated.time_draft

    def draft_then_cancel(tokens, settings=None, cancel_token=None, on_step=None):
        seconds = time_draft(tokens, settings)
        if len(tokens) == LENGTHS[-1]:
            cancel.cancel()
        return seconds

    monkeypatch.setattr(uncalibrated, "time_draft", draft_then_cancel)
    with pytest.raises(Cancelled):
        calibrate_machine(uncalibrated, None, None, cancel, text=TEXT, lengths=LENGTHS, path=path)
    assert not path.exists() and uncalibrated.cost_model is None


def test_the_public_api_runs_the_same_calibration(monkeypatch):
    """engine.api.calibrate_machine is the app's entry: it passes everything through."""
    import engine.api
    import engine.eval.calibrate as calibrate_module

    calls = []
    monkeypatch.setattr(calibrate_module, "calibrate_machine", lambda *args: calls.append(args) or "model")
    engine_, settings, progress, cancel = object(), ModelSettings(), object(), CancelToken()
    assert engine.api.calibrate_machine(engine_, settings, progress, cancel) == "model"
    assert calls == [(engine_, settings, progress, cancel)]


@pytest.mark.parametrize(("score_question", "rows"), [(True, TIMED_QUESTION_ROWS), (False, 0)])
def test_a_timed_draft_pass_scores_like_a_question_when_the_question_is_scored(
    engine, monkeypatch, score_question, rows
):
    seen, iter_score = [], engine.scorer.iter_score

    def recording(tokens, params, cancel):
        seen.append(params.question_rows)
        return iter_score(tokens, params, cancel)

    monkeypatch.setattr(engine.scorer, "iter_score", recording)
    engine.time_draft(list(range(1, 200)), RunSettings(score_question=score_question))
    assert seen == [rows]
