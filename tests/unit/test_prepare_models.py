"""The one first-run policy (engine.pipeline.prepare.prepare_models), used by the app and the CLI."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.core.cancel import CancelToken
from engine.core.settings import ModelSettings
from engine.models import defaults
from engine.pipeline import prepare


@pytest.fixture
def fake_defaults(tmp_path, monkeypatch):
    """A draft that is there but fails its hash, a target that is missing; assembly is recorded."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    present = replace(defaults.DRAFT, filename="present.gguf")
    missing = replace(defaults.TARGET, filename="missing.gguf")
    present.path.parent.mkdir(parents=True)
    present.path.write_bytes(b"there, but not the model")
    monkeypatch.setattr(defaults, "DEFAULTS", (present, missing))
    monkeypatch.setattr(defaults, "DRAFT", present)
    assembled: list[str] = []

    def fake_assemble(spec, progress, cancel):
        progress(1, 1, f"assembling {spec.name}")
        assembled.append(spec.filename)

    monkeypatch.setattr(defaults, "assemble", fake_assemble)
    monkeypatch.setattr(prepare, "ensure_dequantized", lambda path, cancel: assembled.append("dequantized"))
    monkeypatch.setattr(prepare, "measure_draft_precision", lambda *args: assembled.append("measured"))
    return assembled


def test_first_run_assembles_missing_defaults_with_progress_and_leaves_present_ones(fake_defaults):
    labels = []
    prepare.prepare_models(ModelSettings(), lambda done, total, label: labels.append(label), CancelToken())
    assert fake_defaults == ["missing.gguf"]  # the draft fails its hash: not dequantized, not replaced
    assert labels == [f"assembling {defaults.TARGET.name}"]


def test_repair_assembles_a_default_that_fails_its_hash_too(fake_defaults):
    prepare.prepare_models(ModelSettings(), None, CancelToken(), repair=True)
    assert sorted(fake_defaults) == ["missing.gguf", "present.gguf"]


def test_custom_models_are_never_assembled_and_a_custom_gguf_draft_is_cached(fake_defaults, tmp_path):
    draft = tmp_path / "my-draft.gguf"
    draft.write_bytes(b"GGUF")
    prepare.prepare_models(ModelSettings(target_path=tmp_path / "t.gguf", draft_path=draft))
    assert fake_defaults == ["dequantized", "measured"]


def test_setup_measures_the_drafts_format_once_so_the_first_load_need_not(tmp_path, monkeypatch):
    from engine.draft import precision
    from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(precision.PRECISION_ENV)  # the suite's fixed format: this test is of the measurement
    draft = write_tiny_qwen2_gguf(tmp_path / "tiny-draft.gguf", seed=2)
    settings = ModelSettings(target_path=tmp_path / "t.gguf", draft_path=draft)
    labels: list[str] = []
    prepare.prepare_models(settings, lambda done, total, label: labels.append(label))
    verdict = precision.cached_precision(draft)
    assert verdict is not None and verdict.precision in ("int8", "bf16", "fp32")
    assert "measuring the draft's speed in int8, bf16 and fp32 on this CPU (once)" in labels
    monkeypatch.setattr(precision, "measure_precisions", lambda *args: pytest.fail("measured twice"))
    prepare.prepare_models(settings)  # the verdict is cached: nothing measured
    prepare.prepare_models(replace(settings, draft_quant="int8"))  # a format set: nothing to measure
