"""On the real default models: a document longer than the target's window (a 512-token window here,
so the prompt stays short), the full prefill cut and labelled, SpecPrefill fitting it by selection, and
the real draft reading it in segments (its trained window lowered for the test)."""

import pytest

from engine.core.events import RunFinished, StageChanged
from engine.core.settings import ModelSettings, RunSettings
from engine.ingest import load_document
from engine.pipeline import Engine

pytestmark = pytest.mark.real_models
QUESTION = "Where is the zlib documentation (man pages, etc.)? Name the file."
N_CTX, MAX_NEW = 512, 40


@pytest.fixture(scope="module")
def small_window_engine(real_models_ready):
    engine = Engine.load(ModelSettings(n_ctx=N_CTX))
    yield engine
    engine.close()


def test_a_compare_on_a_document_longer_than_the_window(small_window_engine, short_doc, monkeypatch):
    engine = small_window_engine
    monkeypatch.setattr(engine.scorer.model.config, "max_position_embeddings", 400)  # two or more segments
    doc = load_document(short_doc)
    settings = RunSettings(keep=0.5, max_new_tokens=MAX_NEW)
    events = list(engine.stream(doc, QUESTION, "both", settings))
    runs = {e.run: e.result for e in events if isinstance(e, RunFinished)}
    base, spec = runs["baseline"], runs["spec"]
    assert spec.prompt_tokens + MAX_NEW > N_CTX, "the prompt must not fit the window"
    assert base.fit == "truncated" and 0 < base.seen_fraction < 1
    assert base.prefill_tokens <= N_CTX - MAX_NEW
    assert spec.fit == "selected" and spec.positions == "renumber" and not spec.bypassed
    assert spec.prefill_tokens <= N_CTX - MAX_NEW
    assert spec.document_tokens == base.document_tokens
    assert spec.answer.strip(), "SpecPrefill must answer from what it kept"
    draft_stage = next(e.detail for e in events if isinstance(e, StageChanged) and e.stage == "draft")
    assert "segments" in draft_stage
