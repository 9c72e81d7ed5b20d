"""The draft's number format: fixed, or measured once per CPU, torch and draft (engine.draft.precision)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine.core.errors import SettingsError
from engine.core.settings import ModelSettings
from engine.draft import precision
from engine.draft.loader import load_draft_model, pick_device, quantize_int8
from engine.draft.precision import DraftPrecision, fixed_precision, measure_or_cached, measure_precisions
from engine.pipeline.diagnostics import check_draft_precision
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf


@pytest.fixture(autouse=True)
def measured(monkeypatch):
    """The suite fixes the format (tests/conftest.py); these tests are of the measurement."""
    monkeypatch.delenv(precision.PRECISION_ENV, raising=False)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    return write_tiny_qwen2_gguf(tmp_path_factory.mktemp("precision") / "tiny-draft.gguf", seed=2)


def test_the_int8_format_s_quantization_api_is_still_in_torch():
    """int8 rests on torch.ao's dynamic quantization, which torch has deprecated: this fails the day
    it is gone, so that the int8 format is moved to its successor, not silently lost."""
    assert precision.int8_available()
    model = torch.nn.Sequential(torch.nn.Linear(64, 32))
    reference = model(torch.ones(1, 64))
    quantized = quantize_int8(model)
    assert "Dynamic" in type(quantized[0]).__name__ or "dynamic" in type(quantized[0]).__module__
    assert torch.allclose(quantized(torch.ones(1, 64)), reference, atol=0.05)


def test_a_gpu_runs_the_draft_in_half_precision_and_a_set_format_is_kept():
    cuda = fixed_precision("auto", torch.device("cuda"), torch.bfloat16)
    assert cuda.precision == "bf16" and "half precision on cuda" in cuda.reason
    assert fixed_precision("int8", torch.device("mps"), torch.float16).precision == "fp16"
    assert fixed_precision("none", torch.device("cpu"), torch.float32).precision == "fp32"
    assert fixed_precision("bf16", torch.device("cpu"), torch.float32).reason == "set: draft quant bf16"
    assert fixed_precision("auto", torch.device("cpu"), torch.float32) is None


def test_the_environment_sets_the_format_without_a_measurement(monkeypatch):
    monkeypatch.setenv(precision.PRECISION_ENV, "bf16")
    forced = fixed_precision("auto", torch.device("cpu"), torch.float32)
    assert forced.precision == "bf16" and forced.reason == "forced: SPECPREFILL_DRAFT_PRECISION=bf16"
    assert (
        fixed_precision("none", torch.device("cpu"), torch.float32).precision == "fp32"
    )  # the setting first
    monkeypatch.setenv(precision.PRECISION_ENV, "int4")
    with pytest.raises(SettingsError, match="SPECPREFILL_DRAFT_PRECISION=int4: use one of int8, bf16, fp32"):
        fixed_precision("auto", torch.device("cpu"), torch.float32)


def fake_measure(monkeypatch, seconds: dict[str, float], same: dict[str, int]) -> list[str]:
    """Timings as given, and scores whose top 20 chunks are `same` of fp32's top 20 (the others
    from fp32's low-scored ones); returns the formats scored, in order."""
    scored: list[str] = []
    monkeypatch.setattr(precision, "forward_seconds_per_1k", lambda model, tokens: seconds[model])
    reference = np.array([10.0] * 20 + [1.0] * 80)  # fp32 keeps the first 20 chunks, each scored 10

    def chunk_importance(model, sample):
        scored.append(model)
        if model == "fp32":
            return reference
        n_same = same.get(model, 20)  # the chunks not the same hold 1 in place of 10
        return np.array(
            [10.0] * n_same + [0.0] * (20 - n_same) + [5.0] * (20 - n_same) + [0.5] * (60 + n_same)
        )

    monkeypatch.setattr(precision, "chunk_importance", chunk_importance)
    return scored


def test_the_fastest_format_that_keeps_fp32_s_score_is_chosen(monkeypatch):
    scored = fake_measure(monkeypatch, {"int8": 2.0, "bf16": 1.0, "fp32": 4.0}, {"bf16": 16, "int8": 19})
    verdict = measure_precisions(lambda name: name, list(range(900)))
    assert verdict.precision == "int8"
    assert scored == ["fp32", "bf16", "int8"]  # bf16 was tried first, and held 82% only
    assert verdict.agreement == {"bf16": 0.82, "int8": 0.955}
    assert verdict.overlap == {"bf16": 0.8, "int8": 0.95}
    assert verdict.seconds_per_1k == {"int8": 2.0, "bf16": 1.0, "fp32": 4.0}
    assert "bf16 1.0 s, int8 2.0 s, fp32 4.0 s per 1K tokens" in verdict.reason


def test_agreement_weighs_chunks_by_fp32_s_own_scores():
    reference = np.array([9.0, 8.0, 7.9, 1.0, 0.5])
    # one near-tie swapped: a chunk of another's kept, yet nearly all of fp32's kept score is held
    held, overlap = precision.selection_agreement(np.array([9.0, 7.0, 8.0, 1.0, 0.5]), reference)
    assert overlap == 1.0 and held == 1.0  # keep 0.2 of 5 chunks: one, the same
    scores = np.arange(100, 0, -1, dtype=float)
    swapped = scores.copy()
    swapped[[19, 20]] = swapped[[20, 19]]  # the 20th and 21st, nearly tied, change places
    held, overlap = precision.selection_agreement(swapped, scores)
    assert overlap == 0.95 and held == pytest.approx((scores[:19].sum() + scores[20]) / scores[:20].sum())


def test_fp32_is_kept_when_nothing_is_faster(monkeypatch):
    scored = fake_measure(monkeypatch, {"int8": 5.0, "bf16": 9.0, "fp32": 4.0}, {})
    verdict = measure_precisions(lambda name: name, list(range(900)))
    assert verdict.precision == "fp32" and scored == [] and "no format was faster" in verdict.reason


def test_a_torch_without_int8_measures_the_others(monkeypatch):
    monkeypatch.setattr(precision, "int8_available", lambda: False)
    fake_measure(monkeypatch, {"bf16": 1.0, "fp32": 4.0}, {"bf16": 20})
    verdict = measure_precisions(lambda name: name, list(range(900)))
    assert verdict.precision == "bf16" and "int8" not in verdict.seconds_per_1k


def test_the_verdict_is_measured_once_per_draft_file_and_kept_in_the_cache(cache, gguf, monkeypatch):
    calls: list[int] = []

    def measure(load, sample):
        calls.append(len(sample))
        return DraftPrecision("int8", "measured", {"int8": 1.0}, {}, "2026-12-08")

    monkeypatch.setattr(precision, "measure_precisions", measure)
    assert measure_or_cached(gguf, None, lambda: [1, 2, 3]).precision == "int8"
    assert measure_or_cached(gguf, None, lambda: [1, 2, 3]).precision == "int8"
    assert calls == [3]
    stored = json.loads((cache / "specprefill" / precision.VERDICT_FILE).read_text())
    assert [record["precision"] for record in stored.values()] == ["int8"]
    gguf.touch()  # another version of the draft file: measured again
    measure_or_cached(gguf, None, lambda: [1, 2, 3])
    assert calls == [3, 3]


def test_a_real_measurement_of_a_tiny_draft_names_every_format(cache, gguf):
    def load(name: str):
        return load_draft_model(gguf, pick_device("cpu"), "specprefill", name)

    sample = [(7 * i + 3) % 250 for i in range(precision.SAMPLE_TOKENS)]
    verdict = measure_precisions(load, sample)
    assert set(verdict.seconds_per_1k) == {"int8", "bf16", "fp32"}
    assert verdict.precision in ("int8", "bf16", "fp32") and verdict.measured_at
    assert all(0.0 <= share <= 1.0 for share in [*verdict.agreement.values(), *verdict.overlap.values()])


def test_a_bf16_draft_loads_in_bf16(cache, gguf):
    model = load_draft_model(gguf, pick_device("cpu"), "specprefill", "bf16")
    assert next(model.parameters()).dtype == torch.bfloat16


def test_doctor_names_the_precision_and_why(cache, gguf, monkeypatch):
    before = check_draft_precision(ModelSettings(), gguf)
    assert before.ok and "not measured yet" in before.text
    monkeypatch.setattr(
        precision,
        "measure_precisions",
        lambda load, sample: DraftPrecision("bf16", "measured: bf16 fastest", measured_at="2026-12-08"),
    )
    measure_or_cached(gguf, None, lambda: [1, 2])
    after = check_draft_precision(ModelSettings(), gguf)
    assert after.text == "draft bf16 (measured: bf16 fastest), 2026-12-08"
    assert (
        check_draft_precision(ModelSettings(draft_quant="int8"), gguf).text
        == "draft int8 (set: draft quant int8)"
    )
