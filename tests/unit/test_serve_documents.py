"""Several documents warm at once, on the real engine over the tiny GGUF pair: conversations are
matched to their documents by content, whoever sends them and through either API, and a document
asked about again after another one is still served from the draft's cache."""

from __future__ import annotations

import httpx
import ollama
import pytest

from engine.api import RunSettings
from engine.core.settings import ModelSettings
from engine.pipeline import Engine
from tests.unit.serve_harness import MODEL, Server

DOCS = {
    "stone": "The green stone lies under the old bridge by the mill. " * 40,
    "river": "The river bends twice before it reaches the harbour town. " * 40,
}
SPEC = {"mode": "spec", "keep": 0.5}


@pytest.fixture(scope="module")
def long_engine(pair, cache_home):
    """The tiny pair with a window that holds a 2,000-character document (a token a character or so)."""
    target, draft = pair
    loaded = Engine.load(
        ModelSettings(target_path=target, draft_path=draft, n_ctx=4096, n_batch=256, n_threads=1)
    )
    yield loaded
    loaded.close()


def ask(running: Server, doc: str, question: str) -> dict:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"{DOCS[doc]}\n\n{question}"}],
        "max_tokens": 2,
        "specprefill": SPEC,
    }
    response = httpx.post(running.url + "/v1/chat/completions", json=body, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()["usage"]["specprefill"]


def test_a_document_asked_about_again_after_another_is_still_warm(long_engine):
    defaults = RunSettings(max_new_tokens=2, force=True, background_prefill=False, read_ahead=False)
    with Server(long_engine, defaults=defaults) as running:
        assert ask(running, "stone", "Where is the stone?")["served_by"] == "spec"
        assert ask(running, "river", "How often does it bend?")["served_by"] == "spec"
        assert ask(running, "stone", "What lies there?")["served_by"] == "spec_cached_draft"
        messages = [{"role": "user", "content": f"{DOCS['river']}\n\nWhere does it end?"}]
        client = ollama.Client(host=running.url, timeout=120)
        client.chat(model=MODEL, messages=messages, stream=False, options={"num_predict": 2})
        assert len(running.worker.sessions) == 2  # the same river document through Ollama's API


def test_cache_gb_is_the_budget_of_the_documents_kept_warm():
    from engine.cli.main import build_parser
    from engine.cli.serve import serve_model_settings, server_options_error

    args = build_parser().parse_args(["serve", "--cache-gb", "2.5"])
    assert serve_model_settings(args).draft_cache_gb == 2.5
    default = build_parser().parse_args(["serve"])
    assert serve_model_settings(default).draft_cache_gb == ModelSettings().draft_cache_gb
    assert "--cache-gb" in server_options_error(
        build_parser().parse_args(["serve", "--cache-gb", "-1"]), None
    )


def test_enough_ends_an_answer_after_the_token_handed_out_with_its_result(long_engine):
    from engine.api import CancelToken, DocumentSession, RunFinished, TokenGenerated

    enough = CancelToken()
    settings = RunSettings(max_new_tokens=8, force=True, background_prefill=False, read_ahead=False)
    tokens, results = [], []
    for event in long_engine.ask(DocumentSession(DOCS["stone"]), "Where?", "spec", settings, enough=enough):
        if isinstance(event, TokenGenerated):
            tokens.append(event.text)
            if len(tokens) == 2:
                enough.cancel()  # as the server does when a stop sequence appears
        elif isinstance(event, RunFinished):
            results.append(event.result)
    assert len(tokens) == 2 and results[0].generated_tokens == 2 and results[0].stop_reason == "stop"
