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
    assert fake_defaults == ["dequantized"]
