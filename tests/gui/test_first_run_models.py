"""First run: the app's engine factory prepares the models (one policy, engine.api.prepare_models)
before loading them, and the re-assemble offer repairs broken defaults."""

import desktop.app as app
from engine.api import CancelToken, ModelSettings


def test_the_factory_prepares_the_models_then_loads_them(monkeypatch):
    calls = []
    monkeypatch.setattr(
        app,
        "prepare_models",
        lambda settings, progress, cancel, **kw: calls.append(("prepare", settings, kw)),
    )
    monkeypatch.setattr(
        app, "load_engine", lambda settings, progress, cancel: calls.append(("load", settings)) or "engine"
    )
    settings = ModelSettings(target_path="/m/t.gguf", draft_path="/m/d.gguf")
    assert app.load_real_engine(settings, lambda *a: None, CancelToken()) == "engine"
    assert calls == [("prepare", settings, {}), ("load", settings)]


def test_the_re_assemble_offer_repairs_the_defaults(monkeypatch):
    calls = []
    monkeypatch.setattr(
        app, "prepare_models", lambda settings, progress, cancel, **kw: calls.append((settings, kw))
    )
    app.assemble_default_models(lambda *a: None, CancelToken())
    assert calls == [(ModelSettings(), {"repair": True})]
