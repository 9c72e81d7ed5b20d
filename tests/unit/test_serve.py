"""`specprefill serve`'s HTTP behaviour over a fake engine (tests/unit/serve_harness.py): the routes,
the OpenAI shapes, and every error path (401, 404, 400, 413, 429, a client that goes away)."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import openai
import pytest

from engine.api import Cancelled, RunSettings
from engine.serve.worker import EngineWorker
from tests.unit.serve_harness import (  # noqa: F401 (fixtures)
    DOC,
    MODEL,
    Server,
    assert_error,
    chat_body,
    client,
    fake,
    post,
    server,
)


# -- routes and shapes ------------------------------------------------------------------
def test_models_and_health(server):
    assert [m.id for m in client(server).models.list()] == [MODEL]
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["model"] == MODEL and health["capacity"] == 4


def test_a_completion_carries_the_specprefill_usage_and_a_later_turn_reuses_the_session(server, fake):
    first = client(server).chat.completions.create(model=MODEL, messages=chat_body()["messages"])
    assert first.choices[0].message.content == "The green stone."
    assert first.choices[0].finish_reason == "stop"
    usage = first.usage.model_dump()
    assert (
        usage["prompt_tokens"] == 1000 and usage["completion_tokens"] == 4 and usage["total_tokens"] == 1004
    )
    spec = usage["specprefill"]
    assert spec["mode"] == "spec" and spec["kept_fraction"] == 0.2 and spec["ttft_s"] == 0.25
    assert (
        spec["served_by"] == "spec"
        and spec["positions"] == "restore"
        and "prefill_tokens" in spec["selection"]
    )
    assert fake.calls[0]["document"] == DOC and fake.calls[0]["question"] == "Where is the green stone?"

    messages = [
        *chat_body()["messages"],
        {"role": "assistant", "content": "Under the bridge."},
        {"role": "user", "content": "And the red one?"},
    ]
    second = client(server).chat.completions.create(model=MODEL, messages=messages)
    assert second.usage.model_dump()["specprefill"]["served_by"] == "spec_cached_draft"
    assert fake.calls[1]["session"] is fake.calls[0]["session"]
    assert fake.calls[1]["question"].endswith("Assistant: Under the bridge.\n\nUser: And the red one?")


def test_a_stream_sends_chunks_then_the_usage_then_done(server):
    with httpx.stream(
        "POST",
        server.url + "/v1/chat/completions",
        timeout=10,
        json=chat_body(stream=True, stream_options={"include_usage": True}),
    ) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith(
            "text/event-stream"
        )
        events = [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "The green stone."
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["specprefill"]["mode"] == "spec"


def test_the_openai_client_streams_with_usage(server):
    stream = client(server).chat.completions.create(
        model=MODEL, messages=chat_body()["messages"], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "The green stone."
    assert chunks[-1].usage.model_dump()["specprefill"]["kept_fraction"] == 0.2


def test_without_include_usage_a_stream_has_no_usage_chunk(server):
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=chat_body(stream=True)) as response:
        events = [line for line in response.iter_lines() if line.startswith("data: {")]
    assert all("usage" not in json.loads(e[6:]) for e in events)


def test_request_fields_reach_the_engine(server, fake):
    body = chat_body(
        max_completion_tokens=2,
        temperature=0.8,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        seed=7,
        presence_penalty=0.5,
        frequency_penalty=0.25,
        repeat_penalty=1.1,
        specprefill={"mode": "baseline", "keep": "auto"},
    )
    reply = post(server, body).json()
    call = fake.calls[-1]
    assert (
        call["mode"] == "baseline"
        and call["settings"].keep == "auto"
        and call["settings"].max_new_tokens == 2
    )
    sampling = {k: getattr(call["settings"], k) for k in ("temperature", "top_p", "top_k", "min_p", "seed")}
    assert sampling == {"temperature": 0.8, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7}
    penalties = (call["settings"].presence_penalty, call["settings"].frequency_penalty)
    assert penalties == (0.5, 0.25) and call["settings"].repeat_penalty == 1.1
    assert reply["choices"][0]["finish_reason"] == "length" and reply["usage"]["completion_tokens"] == 2
    post(server, chat_body(specprefill={"keep": 0.3}))
    assert fake.calls[-1]["settings"].keep == 0.3 and fake.calls[-1]["mode"] == "auto"


def test_a_system_message_is_the_system_turn(server, fake):
    messages = [{"role": "system", "content": "Answer in French."}, *chat_body()["messages"]]
    post(server, chat_body(messages=messages))
    assert fake.calls[-1]["settings"].system_prompt == "Answer in French."


def test_a_stop_sequence_cuts_the_answer(server):
    reply = post(server, chat_body(stop=[" sto"])).json()
    assert reply["choices"][0]["message"]["content"] == "The green"
    assert reply["choices"][0]["finish_reason"] == "stop"
    with httpx.stream(
        "POST", server.url + "/v1/chat/completions", json=chat_body(stream=True, stop="green")
    ) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "The "


def test_metrics_count_requests_ttft_kept_fraction_and_cache_hits(server):
    post(server, chat_body())
    post(server, chat_body())
    text = httpx.get(server.url + "/metrics").text
    assert 'specprefill_requests_total{route="/v1/chat/completions",status="200"} 2' in text
    assert "specprefill_ttft_seconds_count 2" in text and "specprefill_kept_fraction_count 2" in text
    assert "specprefill_cache_hits_total 1" in text


# -- error paths -----------------------------------------------------------------------
def test_bad_json_is_a_400_error_object(server):
    assert_error(post(server, b'{"model": "tiny-target", "messages": ['), 400, "invalid_json")
    assert_error(post(server, b"[1, 2]"), 400, "invalid_json")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("n", 2),
        ("tools", [{"type": "function"}]),
        ("logprobs", True),
        ("response_format", {"type": "json_object"}),
        ("no_such_field", 1),
    ],
)
def test_a_field_the_server_cannot_honour_is_refused(server, fake, field, value):
    assert_error(post(server, chat_body(**{field: value})), 400, "unsupported_parameter", field)
    assert fake.calls == []


@pytest.mark.parametrize(
    "body",
    [
        chat_body(messages=[]),
        chat_body(messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]),
        chat_body(messages=[{"role": "tool", "content": "x"}]),
        chat_body(max_tokens=0),
        chat_body(max_tokens=3, max_completion_tokens=4),
        chat_body(stop=["a", "b", "c", "d", "e"]),
        chat_body(stream_options={"include_usage": True}),
        chat_body(specprefill={"mode": "fast"}),
        chat_body(specprefill={"keep": 1.5}),
        chat_body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
    ],
)
def test_a_malformed_request_is_a_400(server, fake, body):
    assert_error(post(server, body), 400)
    assert fake.calls == []


def test_an_unknown_model_is_a_404(server):
    assert_error(post(server, chat_body(model="gpt-4o")), 404, "model_not_found", "model")
    assert_error(httpx.get(server.url + "/v1/models/gpt-4o"), 404, "model_not_found")
    assert_error(httpx.get(server.url + "/v1/nothing-here"), 404)


def test_a_body_over_the_limit_is_a_413(fake):
    with Server(fake, max_body_bytes=4096) as server:
        big = chat_body(messages=[{"role": "user", "content": "x" * 5000}])
        assert_error(post(server, big), 413, "body_too_large")

        def chunked():  # no Content-Length: the limit holds on what arrives
            for _ in range(10):
                yield b" " * 1000

        response = httpx.post(
            server.url + "/v1/chat/completions",
            content=chunked(),
            timeout=10,
            headers={"content-type": "application/json"},
        )
        assert_error(response, 413, "body_too_large")
        assert post(server, chat_body(messages=[{"role": "user", "content": "Hi?"}])).status_code == 200
    assert [c["question"] for c in fake.calls] == ["Hi?"]


def test_with_an_api_key_every_route_but_health_needs_it(fake):
    with Server(fake, api_key="s3cret") as server:
        assert_error(post(server, chat_body()), 401, "invalid_api_key")
        assert_error(post(server, chat_body(), headers={"authorization": "Bearer wrong"}), 401)
        assert_error(httpx.get(server.url + "/v1/models"), 401)
        assert_error(httpx.get(server.url + "/metrics"), 401)
        assert httpx.get(server.url + "/health").status_code == 200
        assert fake.calls == []
        with pytest.raises(openai.AuthenticationError):
            client(server, "wrong").models.list()
        reply = client(server, "s3cret").chat.completions.create(
            model=MODEL, messages=chat_body()["messages"]
        )
        assert reply.choices[0].message.content == "The green stone."


def test_a_full_queue_is_a_429_with_retry_after(fake):
    fake.hold.set()
    with Server(fake, capacity=2) as server:
        holders = [threading.Thread(target=post, args=(server, chat_body()), daemon=True) for _ in range(2)]
        for thread in holders:
            thread.start()
        deadline = time.monotonic() + 5
        while server.worker.waiting + server.worker.running < 2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        response = post(server, chat_body())
        assert_error(response, 429, "queue_full")
        assert int(response.headers["retry-after"]) >= 1
        with pytest.raises(openai.RateLimitError):
            client(server).chat.completions.create(model=MODEL, messages=chat_body()["messages"])
        fake.release.set()
        for thread in holders:
            thread.join(10)
        assert post(server, chat_body()).status_code == 200
    assert len(fake.calls) == 3


def test_a_stream_whose_client_goes_away_is_cancelled_within_a_second(server, fake):
    fake.hold.set()
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=chat_body(stream=True)) as response:
        first = next(response.iter_lines())
        assert first.startswith("data: ")
        assert fake.started.wait(30)
        gone = time.monotonic()
    deadline = gone + 5
    while not fake.cancelled_at and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.cancelled_at and fake.cancelled_at[0] - gone < 1.0
    assert fake.calls[0]["cancel"].cancelled


def test_a_waiting_completion_whose_client_goes_away_is_cancelled_within_a_second(server, fake):
    fake.hold.set()
    body = json.dumps(chat_body()).encode()
    with socket.create_connection(("127.0.0.1", server.port)) as raw:
        raw.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert fake.started.wait(30)
    gone = time.monotonic()
    while not fake.cancelled_at and time.monotonic() < gone + 5:
        time.sleep(0.01)
    assert fake.cancelled_at and fake.cancelled_at[0] - gone < 1.0


def test_stopping_the_worker_cancels_the_running_and_queued_requests(fake):
    fake.hold.set()
    worker = EngineWorker(fake, 4, background=False)
    import asyncio

    from engine.serve.worker import END, Job, ShuttingDown

    loop = asyncio.new_event_loop()
    jobs = [Job("doc", "q?", "auto", RunSettings(), loop) for _ in range(2)]
    for job in jobs:
        worker.submit(job)
    assert fake.started.wait(30)
    worker.stop(timeout_s=5)
    assert all(job.cancel.cancelled for job in jobs) and len(fake.calls) == 1 and fake.cancelled_at
    with pytest.raises(ShuttingDown):
        worker.submit(Job("doc", "q?", "auto", RunSettings(), loop))
    loop.run_until_complete(asyncio.sleep(0))  # deliver what the worker handed over
    items = [jobs[0].items.get_nowait() for _ in range(jobs[0].items.qsize())]
    assert isinstance(items[0], Cancelled) and items[-1] is END
    loop.close()
