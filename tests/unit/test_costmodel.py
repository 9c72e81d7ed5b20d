import json

import pytest

from engine.core.errors import SpecPrefillError
from engine.eval.calibrate import calibrate
from engine.pipeline import costmodel
from engine.pipeline.costmodel import CostModel, Quadratic, fit_quadratic


def test_fit_recovers_a_quadratic():
    ns = [512, 1024, 2048, 4096]
    q = fit_quadratic(ns, [0.5 + 0.01 * n + 2e-7 * n * n for n in ns])
    assert q.c == pytest.approx(0.5, abs=1e-6)
    assert q.a == pytest.approx(0.01, rel=1e-6)
    assert q.b == pytest.approx(2e-7, rel=1e-6)


def test_fit_never_returns_negative_terms():
    ns = [1000, 2000, 3000]
    q = fit_quadratic(ns, [10.0, 19.0, 27.0])  # concave data would want b < 0
    assert min(q.a, q.b, q.c) >= 0
    assert q(2000) == pytest.approx(19.0, rel=0.1)


def test_estimate_and_bypass_rule():
    model = CostModel(target_prefill=Quadratic(0, 0.02, 0), draft=Quadratic(5, 0.005, 0))
    est = model.estimate(8192, 0.2)
    kept = model.kept_tokens(8192, 0.2)  # ceil(0.2 * 256 chunks) = 52 chunks
    assert kept == 52 * 32
    assert est["baseline_ttft_s"] == pytest.approx(0.02 * 8192)
    assert est["spec_ttft_s"] == pytest.approx(5 + 0.005 * 8192 + 0.02 * kept)
    assert est["speedup"] == pytest.approx(est["baseline_ttft_s"] / est["spec_ttft_s"])
    assert model.pays_off(8192, 0.2)
    assert not model.pays_off(300, 0.2)  # the draft's fixed cost dominates short prompts


def test_save_load_roundtrip_and_errors(tmp_path):
    path = tmp_path / "cal.json"
    model = CostModel(target_prefill=Quadratic(1, 2, 3), draft=Quadratic(4, 5, 6), machine={"x": 1})
    costmodel.save(model, path)
    assert costmodel.load(path).to_json() == model.to_json()
    assert costmodel.load(tmp_path / "missing.json") is None
    with pytest.raises(SpecPrefillError, match="calibrate"):
        costmodel.require(tmp_path / "missing.json")
    path.write_text(json.dumps({"draft": {}}))
    with pytest.raises(SpecPrefillError, match="not a valid"):
        costmodel.load(path)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[1, 2]", "\x00not json"])
def test_a_hostile_calibration_file_is_not_valid_and_runs_go_on_without_it(tmp_path, text):
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(SpecPrefillError, match="not a valid"):
        costmodel.load(path)
    assert costmodel.load_matching(object(), path) is None


def test_calibrate_on_the_tiny_engine_fits_its_measurements(engine):
    text = "The quick brown fox jumps over the lazy dog. " * 40
    items = list(calibrate(engine, text, [64, 128, 256], lookahead=2))
    model = items[-1]
    measured = [i for i in items[:-1]]
    assert [(role, n) for role, n, _ in measured] == [
        ("target", 64),
        ("draft", 64),
        ("target", 128),
        ("draft", 128),
        ("target", 256),
        ("draft", 256),
    ]
    assert all(seconds > 0 for _, _, seconds in measured)
    assert isinstance(model, CostModel)
    assert model.measurements["target"]["256"] == measured[4][2]
    assert model.baseline_ttft(256) > 0 and model.draft(256) > 0


def test_attention_area_is_the_square_without_a_window():
    for n in (1, 1000, 1024, 5000, 16384):
        assert costmodel.attention_area(n, 0, chunk=1024) == n * n


def test_attention_area_counts_the_pairs_a_windowed_prefill_computes():
    # chunk 4, window 4, sinks 2: chunks start at 0, 4, 8, 12; a chunk starting past 6 sees 6 earlier keys.
    n, chunk, window, sinks = 14, 4, 4, 2
    pairs = 0
    for start in range(0, n, chunk):
        q = min(chunk, n - start)
        earlier = start if start <= sinks + window else sinks + window
        pairs += q * earlier + q * (q + 1) // 2  # earlier keys, then causal within the chunk
    area = costmodel.attention_area(n, window, chunk=chunk, sinks=sinks)
    assert area == pytest.approx(2 * pairs, abs=n)  # the area counts the diagonal as half
    assert costmodel.attention_area(16384, 4096) < 0.6 * 16384**2  # linear growth past the window
    assert costmodel.attention_area(4096, 4096) == 4096**2  # nothing cut below the window


def test_windowed_estimate_scales_only_the_attention_term():
    model = CostModel(target_prefill=Quadratic(0, 0.01, 0), draft=Quadratic(1, 0.002, 1e-7))
    full, windowed = model.estimate(16384, 0.2, 0), model.estimate(16384, 0.2, 4096)
    assert full["draft_s"] == pytest.approx(1 + 0.002 * 16384 + 1e-7 * 16384**2)
    area = costmodel.attention_area(16384, 4096)
    assert windowed["draft_s"] == pytest.approx(1 + 0.002 * 16384 + 1e-7 * area)
    assert windowed["target_prefill_s"] == pytest.approx(full["target_prefill_s"])
    assert windowed["draft_window"] == 4096 and windowed["speedup"] > full["speedup"]


def test_short_prompts_keep_the_first_and_question_chunks():
    model = CostModel(target_prefill=Quadratic(0, 0.02, 0), draft=Quadratic(0, 0.001, 0))
    assert model.kept_tokens(200, 0.2) == 64  # ceil(0.2 * 7) = 2 chunks
    assert model.kept_tokens(100, 0.1) == 64  # 1 chunk by keep, but first and last are always kept
    assert model.kept_tokens(20, 0.2) == 20


def test_no_auto_specprefill_below_the_shortest_calibrated_length():
    cheap_draft = dict(target_prefill=Quadratic(0, 0.02, 0), draft=Quadratic(0, 0.0001, 0))
    uncalibrated_lengths = CostModel(**cheap_draft)
    timed = CostModel(**cheap_draft, measurements={"draft": {"1024": 0.1, "4096": 0.4}, "target": {}})
    assert timed.shortest_calibrated() == 1024 and uncalibrated_lengths.shortest_calibrated() == 0
    assert uncalibrated_lengths.pays_off(512, 0.2)
    assert not timed.pays_off(512, 0.2) and timed.pays_off(1024, 0.2)
