"""Ollama's API on `specprefill serve`, talked to with Ollama's own Python client (fake engine):
the model list, show, version, chat and generate, streamed and not, options honoured or refused,
and the errors as Ollama's error objects."""

from __future__ import annotations

import json

import httpx
import ollama
import pytest

from engine.serve.model_facts import model_facts
from tests.unit.serve_harness import DOC, MODEL, Server, fake, server  # noqa: F401 (fixtures)

QUESTION = "Where is the green stone?"
MESSAGES = [{"role": "user", "content": f"{DOC}\n\n{QUESTION}"}]


def ollama_client(running: Server) -> ollama.Client:
    return ollama.Client(host=running.url, timeout=10)


def test_the_client_lists_and_shows_the_model(server):
    client = ollama_client(server)
    listed = client.list().models
    assert [m.model for m in listed] == [f"{MODEL}:latest"]
    assert listed[0].details is not None and listed[0].details.format == "gguf"
    shown = client.show(MODEL)
    assert shown.capabilities == ["completion"] and shown.details.format == "gguf"
    assert [m.model for m in client.ps().models] == [f"{MODEL}:latest"]
    assert httpx.get(server.url + "/api/version").json()["version"]


def test_the_client_chats_with_the_specprefill_timings_in_the_last_message(server, fake):
    reply = ollama_client(server).chat(model=f"{MODEL}:latest", messages=MESSAGES, stream=False)
    assert reply.message.content == "The green stone." and reply.done and reply.done_reason == "stop"
    assert reply.prompt_eval_count == 1000 and reply.eval_count == 4
    assert reply.prompt_eval_duration == 250_000_000  # the TTFT, in nanoseconds
    assert fake.calls[0]["document"] == DOC and fake.calls[0]["question"] == QUESTION
    raw = httpx.post(
        server.url + "/api/chat", json={"model": MODEL, "messages": MESSAGES, "stream": False}, timeout=10
    ).json()
    assert raw["specprefill"]["mode"] == "spec" and raw["specprefill"]["kept_fraction"] == 0.2


def test_the_client_streams_a_chat_and_a_later_turn_reuses_the_session(server, fake):
    client = ollama_client(server)
    parts = list(client.chat(model=MODEL, messages=MESSAGES, stream=True))
    assert "".join(p.message.content for p in parts) == "The green stone."
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    follow_up = [
        *MESSAGES,
        {"role": "assistant", "content": "Under the bridge."},
        {"role": "user", "content": "And the red one?"},
    ]
    with httpx.stream("POST", server.url + "/api/chat", json={"model": MODEL, "messages": follow_up}) as r:
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert lines[-1]["done"] and lines[-1]["specprefill"]["served_by"] == "spec_cached_draft"
    assert fake.calls[1]["session"] is fake.calls[0]["session"]


def test_generate_streams_ndjson_and_takes_the_system_turn(server, fake):
    with httpx.stream(
        "POST",
        server.url + "/api/generate",
        json={"model": MODEL, "prompt": f"{DOC}\n\n{QUESTION}", "system": "Answer in French."},
        timeout=10,
    ) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert "".join(line.get("response", "") for line in lines) == "The green stone."
    assert lines[-1]["done"] and lines[-1]["eval_count"] == 4
    assert fake.calls[0]["settings"].system_prompt == "Answer in French."
    whole = ollama_client(server).generate(model=MODEL, prompt="Hi?", stream=False)
    assert whole.response == "The green stone." and whole.done


def test_options_reach_the_engine(server, fake):
    options = {
        "num_predict": 2,
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": 40,
        "seed": 7,
        "repeat_penalty": 1.1,
        "stop": ["stone"],
        "num_ctx": 8192,  # accepted: the server's context applies
    }
    reply = ollama_client(server).chat(model=MODEL, messages=MESSAGES, options=options, stream=False)
    settings = fake.calls[0]["settings"]
    assert settings.max_new_tokens == 2 and settings.temperature == 0.8 and settings.top_p == 0.9
    assert settings.top_k == 40 and settings.seed == 7 and settings.repeat_penalty == 1.1
    assert reply.done_reason == "length" and reply.message.content == "The green"


def test_an_empty_chat_loads_the_model_as_ollama_does(server, fake):
    reply = ollama_client(server).chat(model=MODEL, messages=[], stream=False)
    assert reply.done and reply.done_reason == "load" and fake.calls == []


@pytest.mark.parametrize(
    "body",
    [
        {"model": MODEL, "messages": MESSAGES, "format": "json"},
        {"model": MODEL, "messages": MESSAGES, "options": {"mirostat": 2}},
        {"model": MODEL, "messages": MESSAGES, "options": {"no_such_option": 1}},
        {"model": MODEL, "messages": MESSAGES, "tools": [{"type": "function"}]},
        {"model": MODEL, "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]},
        {"model": MODEL, "messages": MESSAGES, "surprise": True},
    ],
)
def test_what_cannot_be_honoured_is_refused_as_an_ollama_error(server, fake, body):
    response = httpx.post(server.url + "/api/chat", json=body, timeout=10)
    assert response.status_code == 400 and set(response.json()) == {"error"}, response.text
    assert fake.calls == []


def test_an_unknown_model_is_a_404_the_client_raises(server):
    with pytest.raises(ollama.ResponseError) as raised:
        ollama_client(server).chat(model="llama3", messages=MESSAGES, stream=False)
    assert raised.value.status_code == 404 and "llama3" in raised.value.error


def test_the_model_list_reads_the_targets_gguf_header(pair, fake, tmp_path):
    target, _ = pair
    named = tmp_path / "tiny-target-q4_k_m.gguf"
    named.write_bytes(target.read_bytes())
    facts = model_facts(named, 4096)
    assert facts.family == "qwen2" and facts.quantization_level == "Q4_K_M"
    assert facts.size == named.stat().st_size and facts.n_parameters > 0 and len(facts.digest) == 64
    assert facts.parameter_size.endswith(("M", "B"))
    with Server(fake, facts=facts) as running:
        listed = ollama_client(running).list().models[0]
        assert listed.size == facts.size and listed.details.family == "qwen2"
        assert listed.details.quantization_level == "Q4_K_M"
        shown = ollama_client(running).show(MODEL)
        assert shown.modelinfo["qwen2.context_length"] == 4096


def test_an_unreadable_target_leaves_the_facts_empty(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf")
    facts = model_facts(bad, 2048)
    assert facts.family == "" and facts.size == 0 and facts.context_length == 2048
