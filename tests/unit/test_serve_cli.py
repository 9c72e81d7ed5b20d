"""`specprefill serve` as a process: it refuses to listen beyond loopback without an API key, and
on SIGTERM it lets the request in flight finish, then exits 0 (tiny GGUF pair, a free port)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time

import httpx
import pytest

from engine.core.children import child_env, owned_cwd, python_command
from tests.fixtures.tiny_gguf import write_tiny_pair

pytestmark = pytest.mark.slow


def serve_command(*args: str) -> list[str]:
    return python_command("-m", "engine.cli", "serve", *args)


def test_listening_beyond_loopback_without_a_key_is_refused_with_one_line():
    env = child_env()
    env.pop("SPECPREFILL_API_KEY", None)
    with owned_cwd() as cwd:
        done = subprocess.run(
            serve_command("--host", "0.0.0.0"), cwd=cwd, env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--api-key" in lines[0] and "0.0.0.0" in lines[0], done.stderr


def wait_until_healthy(proc: subprocess.Popen, url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"the server exited: {proc.stderr.read()}"
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)


def test_sigterm_finishes_the_request_in_flight_then_exits_0(tmp_path, free_port):
    target, draft = write_tiny_pair(tmp_path / "models")
    env = dict(child_env(), XDG_CACHE_HOME=str(tmp_path / "cache"))
    args = (
        "--port",
        str(free_port),
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--threads",
        "1",
        "--n-ctx",
        "1024",
        "--model-name",
        "tiny",
        "--no-background-prefill",
    )
    url = f"http://127.0.0.1:{free_port}"
    with owned_cwd() as cwd:
        proc = subprocess.Popen(serve_command(*args), cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
        try:
            wait_until_healthy(proc, url)
            first_chunk, events = threading.Event(), []

            def ask() -> None:
                body = {
                    "model": "tiny",
                    "max_tokens": 200,
                    "stream": True,
                    "messages": [{"role": "user", "content": "Tell a long story."}],
                }
                with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as response:
                    for line in response.iter_lines():
                        if line.startswith("data: "):
                            events.append(line[6:])
                            first_chunk.set()

            asker = threading.Thread(target=ask, daemon=True)
            asker.start()
            assert first_chunk.wait(60)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, proc.stderr.read()
            asker.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert events[-1] == "[DONE]" and "error" not in json.loads(events[-2])
    assert "server stopped" in proc.stderr.read()
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/health", timeout=1)
