"""`specprefill serve` against hostile or careless requests (fake engine): no request can stop the
worker, a failed worker is restarted, every error is an error object without local paths, the
counters stay bounded, stops are bounded and cut in linear time, a client that leaves a
non-streaming request stops it, and without a key only local JSON requests are served."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.api import RunSettings, TokenGenerated
from engine.serve import worker as worker_module
from engine.serve.stops import StopScanner
from engine.serve.worker import END, EngineWorker, Job
from tests.unit.serve_harness import (  # noqa: F401 (fixtures)
    MODEL,
    FakeEngine,
    Server,
    assert_error,
    chat_body,
    fake,
    post,
    server,
)


def wait_for(predicate, timeout_s: float = 10.0, step_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step_s)
    return True


# -- the worker survives ---------------------------------------------------------------------
def test_a_lone_surrogate_leaves_the_worker_answering_the_next_request(fake):
    with Server(fake, background=True) as running:
        raw = (
            b'{"model": "%s", "messages": [{"role": "system", "content": "\\ud800"},'
            b' {"role": "user", "content": "Hi?"}]}' % MODEL.encode()
        )
        first = post(running, raw)
        assert first.status_code in (200, 400), first.text
        reply = post(running, chat_body())
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"] == "The green stone."
        assert httpx.get(running.url + "/health").status_code == 200


def test_a_worker_that_fails_anyway_is_restarted_and_health_says_so_meanwhile(fake, monkeypatch):
    monkeypatch.setattr(worker_module, "RESTART_PAUSE_S", 1.0)
    with Server(fake) as running:
        worker = running.worker
        failures = iter([RuntimeError("a fault outside any request")])

        def note_seconds(seconds):  # fails once, after the job's answer was handed over
            if (exc := next(failures, None)) is not None:
                raise exc

        monkeypatch.setattr(worker, "_note_seconds", note_seconds)
        assert post(running, chat_body()).status_code == 200
        assert wait_for(lambda: httpx.get(running.url + "/health").status_code == 503, 1.0)
        assert httpx.get(running.url + "/health").json()["status"] == "restarting"
        assert wait_for(lambda: httpx.get(running.url + "/health").status_code == 200, 5.0)
        assert worker.restarts == 1
        assert post(running, chat_body()).status_code == 200


# -- error objects ---------------------------------------------------------------------------
def test_deeply_nested_json_is_a_400_error_object(server, fake):
    nested = b'{"model": "tiny-target", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert_error(post(server, nested), 400)
    assert fake.calls == []


class FailingEngine(FakeEngine):
    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc

    def ask(self, session, question, mode, settings, cancel, enough=None):
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (RuntimeError("llama.cpp could not load /root/.cache/specprefill/states/ab12.bin"), 500),
        (ValueError("the prompt in /home/someone/secret/report.txt is too long"), 400),
        (OSError(2, "No such file or directory", "/var/lib/specprefill/x.gguf"), 500),
    ],
)
def test_an_engine_error_reaches_the_client_without_local_paths(exc, status):
    with Server(FailingEngine(exc)) as running:
        error = assert_error(post(running, chat_body()), status)
    assert (
        "/root" not in error["message"] and "/home" not in error["message"] and "/var" not in error["message"]
    )
    assert "RuntimeError" not in error["message"] and "OSError" not in error["message"]


def test_an_unknown_route_is_an_error_object_and_metrics_stay_bounded(server):
    long_path = "/x" + "a" * 8000
    with httpx.Client(timeout=10) as http:  # one connection for all of them
        for i in range(100):  # a series each would be 0.8 MB: the bound holds for any number
            assert http.get(f"{server.url}{long_path}{i}").status_code == 404
    assert_error(httpx.get(server.url + "/%22%7D%0Aevil%201", timeout=10), 404)  # '/"}\nevil 1'
    text = httpx.get(server.url + "/metrics").text
    assert len(text.encode()) < 200_000
    assert 'specprefill_requests_total{route="unmatched",status="404"} 101' in text
    assert "evil 1" not in text


def test_requests_are_counted_by_route_template(server):
    assert httpx.get(server.url + "/v1/models/" + MODEL).status_code == 200
    assert httpx.get(server.url + "/v1/models/other").status_code == 404
    text = httpx.get(server.url + "/metrics").text
    assert 'route="/v1/models/{model}",status="200"} 1' in text
    assert 'route="/v1/models/{model}",status="404"} 1' in text
    assert "/v1/models/other" not in text


# -- stop sequences --------------------------------------------------------------------------
def test_long_stop_sequences_are_refused_at_once_and_health_answers(server, fake):
    stops = ["x" * 200_000 for _ in range(4)]
    start = time.monotonic()
    assert_error(post(server, chat_body(stop=stops)), 400, None, "stop")
    assert time.monotonic() - start < 5
    health = httpx.get(server.url + "/health", timeout=1.0)
    assert health.status_code == 200 and fake.calls == []


def first_cut(text: str, stops: tuple[str, ...]) -> str | None:
    """The reference: the text before the stop that completes first (None: no stop in it)."""
    ends = [(text.find(s) + len(s), text.find(s)) for s in stops if s in text]
    return text[: min(ends)[1]] if ends else None


@given(
    st.lists(st.text(alphabet="ab", min_size=1, max_size=6), min_size=1, max_size=4),
    st.lists(st.text(alphabet="abc", max_size=5), max_size=12),
)
def test_the_stop_scanner_cuts_where_a_whole_scan_would(stops, pieces):
    scanner = StopScanner(tuple(stops))
    sent = "".join(scanner.feed(p) for p in pieces)
    expected = first_cut("".join(pieces), tuple(stops))
    if expected is None:
        assert not scanner.stopped and sent + scanner.flush() == "".join(pieces)
    else:
        assert scanner.stopped and sent == expected


def test_stops_are_cut_on_the_worker_thread():
    class Pieces(FakeEngine):
        def __init__(self):
            super().__init__(pieces=("The", " gr", "een", " stone", "."))

    engine = Pieces()
    worker = EngineWorker(engine, 2, background=False)
    loop = asyncio.new_event_loop()
    try:
        job = Job("doc", "q?", "auto", RunSettings(), loop, stops=("een s",))
        worker.submit(job)

        async def items():
            out = []
            while (item := await job.items.get()) is not END:
                out.append(item)
            return out

        async def with_timeout():
            return await asyncio.wait_for(items(), 10)

        got = loop.run_until_complete(with_timeout())
        assert "".join(i for i in got if isinstance(i, str)) == "The gr" and job.stopped
        assert engine.generated == [4]  # the engine ended the answer at the stop: " stone" completed it
        assert [i.stop_reason for i in got if not isinstance(i, str)] == ["stop"]
    finally:
        worker.stop(5)
        loop.close()


# -- a client that leaves ----------------------------------------------------------------------
class SteadyEngine(FakeEngine):
    """A token every 20 ms until cancelled: never the quarter-second pause a check between tokens needs."""

    def ask(self, session, question, mode, settings, cancel, enough=None):
        def events():
            self.started.set()
            for i in range(settings.max_new_tokens):
                if cancel.cancelled:
                    self.cancelled_at.append(time.monotonic())
                    cancel.raise_if_cancelled()
                time.sleep(0.02)
                yield TokenGenerated("spec", "x", i)

        return events()


def test_a_non_streaming_client_that_leaves_mid_answer_stops_it():
    engine = SteadyEngine()
    with Server(engine) as running:
        body = json.dumps(chat_body(max_tokens=100_000)).encode()
        with socket.create_connection(("127.0.0.1", running.port)) as raw:
            raw.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            assert engine.started.wait(30)
            time.sleep(0.5)  # tokens are flowing
        gone = time.monotonic()
        assert wait_for(lambda: bool(engine.cancelled_at), 5)
        assert engine.cancelled_at[0] - gone < 1.5
        assert wait_for(lambda: running.worker.running == 0, 5)


# -- who may use it --------------------------------------------------------------------------
def test_without_a_key_only_local_json_requests_are_served(server, fake):
    plain = httpx.post(
        server.url + "/v1/chat/completions",
        content=b'{"model": "tiny-target", "messages": [{"role": "user", "content": "Hi?"}]}',
        headers={"content-type": "text/plain"},
        timeout=10,
    )
    assert_error(plain, 415, "not_json")
    assert_error(post(server, chat_body(), headers={"host": "evil.example:8080"}), 403, "forbidden_host")
    assert_error(
        post(server, chat_body(), headers={"origin": "https://evil.example"}), 403, "forbidden_origin"
    )
    assert_error(post(server, chat_body(), headers={"origin": "null"}), 403, "forbidden_origin")
    assert fake.calls == []
    assert post(server, chat_body(), headers={"origin": "http://localhost:3000"}).status_code == 200
    assert post(server, chat_body(), headers={"host": "localhost:1"}).status_code == 200


def test_with_a_key_a_web_page_still_needs_it(fake):
    with Server(fake, api_key="k") as running:
        response = post(running, chat_body(), headers={"origin": "https://evil.example"})
        assert_error(response, 401, "invalid_api_key")
        assert fake.calls == []


def test_a_queued_job_gets_its_end_even_when_cancelled_before_it_runs(fake):
    fake.hold.set()
    worker = EngineWorker(fake, 4, background=False)
    loop = asyncio.new_event_loop()
    try:
        first, second = (Job("doc", "q?", "auto", RunSettings(), loop) for _ in range(2))
        worker.submit(first)
        worker.submit(second)
        assert fake.started.wait(10)
        second.cancel.cancel()
        fake.release.set()

        async def drain(job):
            while await job.items.get() is not END:
                pass

        async def both():
            await asyncio.wait_for(asyncio.gather(drain(first), drain(second)), 10)

        loop.run_until_complete(both())
        assert len(fake.calls) == 1
    finally:
        worker.stop(5)
        loop.close()
