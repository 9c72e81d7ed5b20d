"""`specprefill serve` over a fake engine, for the serve tests: the engine's `ask` contract, and a
real uvicorn server on a thread on a loopback socket of its own, so disconnects and queueing are
the real ones."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import openai
import pytest
import uvicorn

from engine.api import NEVER, Cancelled, RunFinished, RunResult, RunSettings, TokenGenerated
from engine.serve.app import ServeConfig, create_app
from engine.serve.worker import EngineWorker

MODEL = "tiny-target"
DOC = "The green stone lies under the bridge. " * 80  # over the document threshold (2,000 characters)


class FakeEngine:
    """Engine.ask's contract: token events, then one RunFinished; `hold` blocks before the first token
    until released (or the request is cancelled: Cancelled, as the engine raises)."""

    def __init__(self, pieces=("The", " green", " stone", ".")) -> None:
        self.pieces = pieces
        self.hold = threading.Event()
        self.release = threading.Event()
        self.started = threading.Event()
        self.calls: list[dict] = []
        self.cancelled_at: list[float] = []
        self.generated: list[int] = []  # tokens each answer generated

    def ask(self, session, question, mode, settings, cancel, enough=NEVER):
        self.calls.append(
            dict(
                session=session,
                document=session.text,
                question=question,
                mode=mode,
                settings=settings,
                cancel=cancel,
            )
        )

        def events():
            self.started.set()
            while self.hold.is_set() and not self.release.is_set():
                if cancel.cancelled:
                    self.cancelled_at.append(time.monotonic())
                    raise Cancelled()
                time.sleep(0.01)
            n = 0
            for i, piece in enumerate(self.pieces[: settings.max_new_tokens]):
                cancel.raise_if_cancelled()
                yield TokenGenerated("spec", piece, i)
                n += 1
                if enough.cancelled:  # as the engine does: the answer ends after this token
                    break
            self.generated.append(n)
            served = "spec" if session.answered == 0 else "spec_cached_draft"
            yield RunFinished(
                "spec",
                RunResult(
                    run="spec",
                    answer="".join(self.pieces),
                    prompt_tokens=1000,
                    prefill_tokens=200,
                    ttft_s=0.25,
                    decode_tok_s=10.0,
                    generated_tokens=n,
                    tokenize_s=0.01,
                    target_prefill_s=0.1,
                    kept_fraction=0.2,
                    positions="restore",
                    served_by=served,
                    stop_reason="stop"
                    if enough.cancelled
                    else "max_new_tokens"
                    if n < len(self.pieces)
                    else "eos",
                ),
            )
            session.answered += 1

        return events()

    def background_needed(self, session, settings=None) -> bool:
        return False


class Server:
    def __init__(
        self,
        engine: FakeEngine,
        capacity: int = 4,
        background: bool = False,
        defaults: RunSettings | None = None,
        **config,
    ) -> None:
        self.engine = engine
        self.worker = EngineWorker(engine, capacity, background=background)
        defaults = defaults or RunSettings(max_new_tokens=16)
        app = create_app(self.worker, ServeConfig(MODEL, defaults, **config))
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        # Bound here and handed to uvicorn: no other process can take the port between a lookup and
        # the bind (a "free port" let go and bound again can be taken by a concurrent test run).
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        getattr(self.engine, "release", threading.Event()).set()
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@pytest.fixture
def fake() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def server(fake):
    with Server(fake) as running:
        yield running


def chat_body(**extra) -> dict:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"{DOC}\n\nWhere is the green stone?"}],
        **extra,
    }


def post(server: Server, body, **kwargs) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        server.url + "/v1/chat/completions",
        content=content,
        timeout=10,
        headers={"content-type": "application/json", **kwargs.pop("headers", {})},
        **kwargs,
    )


def assert_error(
    response: httpx.Response, status: int, code: str | None = None, param: str | None = None
) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code is not None:
        assert error["code"] == code
    if param is not None:
        assert error["param"] == param
    return error


def client(server: Server, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=10)
