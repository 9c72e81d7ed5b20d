"""First run: the real engine factory assembles missing default models before loading."""

from dataclasses import replace

import desktop.app as app
from engine.models import defaults as models
from engine.core.cancel import CancelToken
from engine.core.settings import ModelSettings


def test_missing_defaults_are_assembled_with_progress_and_present_ones_left_alone(tmp_path, monkeypatch):
    present = replace(models.DRAFT, filename="present.gguf")
    missing = replace(models.TARGET, filename="missing.gguf")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    present.path.parent.mkdir(parents=True)
    present.path.write_bytes(b"not verified, but there: the banner offers to replace it")
    monkeypatch.setattr(models, "DEFAULTS", (present, missing))
    assembled, reports = [], []

    def fake_assemble(spec, progress, cancel):
        progress(1, 1, f"assembling {spec.name}")
        assembled.append(spec.filename)

    monkeypatch.setattr(models, "assemble", fake_assemble)
    app.assemble_missing_defaults(lambda d, t, label: reports.append(label), CancelToken())
    assert assembled == ["missing.gguf"]
    assert reports == [f"assembling {missing.name}"]


def test_custom_model_paths_skip_the_default_assembly(monkeypatch):
    calls = []
    monkeypatch.setattr(app, "assemble_missing_defaults", lambda *a: calls.append(a))

    class FakeEngine:
        @staticmethod
        def load(settings, progress, cancel):
            return "engine"

    import engine.pipeline

    monkeypatch.setattr(engine.pipeline, "Engine", FakeEngine)
    settings = ModelSettings(target_path="/m/t.gguf", draft_path="/m/d.gguf")
    assert app.load_real_engine(settings, lambda *a: None, CancelToken()) == "engine"
    assert calls == []
    assert app.load_real_engine(ModelSettings(), lambda *a: None, CancelToken()) == "engine"
    assert len(calls) == 1
