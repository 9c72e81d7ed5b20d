"""`specprefill serve` on the real default models, talked to with the real clients: the `openai`
client (a ~4K-token document answered by SpecPrefill, streamed and not, usage.specprefill naming the
mode, TTFT and kept fraction, and a second turn about it served from the draft's cache), the
`ollama` client (list, chat, stream, and a seeded sampled answer twice the same) and the `llm` CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import ollama
import openai
import pytest

from engine.core.children import child_env, owned_cwd, python_command
from tests.integration.conftest import FAQ

pytestmark = [pytest.mark.real_models, pytest.mark.slow]
MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
QUESTION = "Where is the zlib documentation (man pages, etc.)? Name the file."
SPEC = {"mode": "spec", "keep": 0.2}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(real_models_ready):
    port = free_port()
    with owned_cwd() as cwd:
        proc = subprocess.Popen(
            python_command(
                "-m",
                "engine.cli",
                "serve",
                "--port",
                str(port),
                "--force",
                "--max-new-tokens",
                "8",
                "--no-background-prefill",
            ),
            cwd=cwd,
            env=child_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start in 300 s"
            time.sleep(0.5)
        yield openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)
        proc.terminate()
        assert proc.wait(60) == 0
        os.environ.get("SPECPREFILL_SERVE_LOG") and print(proc.stderr.read())


def test_serve_answers_by_specprefill_and_reuses_the_cache_on_the_next_turn(server):
    document = FAQ.read_text()
    messages = [{"role": "user", "content": f"{document}\n\n{QUESTION}"}]
    assert [m.id for m in server.models.list()] == [MODEL]

    t0 = time.perf_counter()
    first = server.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, extra_body={"specprefill": SPEC}
    )
    first_s = time.perf_counter() - t0
    spec = first.usage.model_dump()["specprefill"]
    print(
        f"\nturn 1 (non-streamed): {first.usage.prompt_tokens} prompt tokens, TTFT {spec['ttft_s']:.1f}s, "
        f"kept {spec['kept_fraction']:.2f}, served by {spec['served_by']}, {first_s:.1f}s in all: "
        f"{first.choices[0].message.content!r}"
    )
    assert first.usage.prompt_tokens > 3500
    assert spec["mode"] == "spec" and spec["served_by"] == "spec" and 0 < spec["kept_fraction"] < 0.5
    assert spec["ttft_s"] > 0 and first.choices[0].message.content

    follow_up = [
        *messages,
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "Which file holds the license?"},
    ]
    t0 = time.perf_counter()
    chunks = list(
        server.chat.completions.create(
            model=MODEL,
            messages=follow_up,
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"specprefill": SPEC},
        )
    )
    second_s = time.perf_counter() - t0
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    second = chunks[-1].usage.model_dump()["specprefill"]
    print(
        f"turn 2 (streamed): TTFT {second['ttft_s']:.1f}s, kept {second['kept_fraction']:.2f}, served by "
        f"{second['served_by']}, {second_s:.1f}s in all: {text!r}"
    )
    assert text and second["mode"] == "spec" and second["served_by"] == "spec_cached_draft"
    assert second["ttft_s"] < spec["ttft_s"]


def test_the_ollama_client_chats_streams_and_samples_reproducibly(server):
    """After the OpenAI turns above, the same document through Ollama's API: the same session."""
    client = ollama.Client(host=str(server.base_url).removesuffix("/v1/"), timeout=600)
    assert [m.model for m in client.list().models] == [f"{MODEL}:latest"]
    messages = [{"role": "user", "content": f"{FAQ.read_text()}\n\n{QUESTION}"}]
    sampled = {"temperature": 0.8, "top_p": 0.9, "seed": 7, "num_predict": 8}
    parts = list(client.chat(model=MODEL, messages=messages, stream=True, options=sampled))
    streamed = "".join(p.message.content for p in parts)
    assert streamed and parts[-1].done
    assert parts[-1].prompt_eval_count > 3500 and parts[-1].eval_count >= 1

    # the same seed, not streamed this time: the same sampled answer
    again = client.chat(model=MODEL, messages=messages, options=sampled, stream=False).message.content
    print(f"\nollama, sampled twice with seed 7: {[streamed, again]!r}")
    assert again == streamed


def test_the_llm_cli_answers_a_piped_document_with_sampling(server, tmp_path):
    url = str(server.base_url).removesuffix("/")
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: sp\n  model_name: {MODEL}\n  api_base: {url}\n"
    )
    env = {**child_env(), "LLM_USER_PATH": str(tmp_path)}
    llm = Path(sys.executable).with_name("llm")
    with owned_cwd() as cwd:
        done = subprocess.run(
            [str(llm), "-m", "sp", "--no-log", "-o", "temperature", "0.7", "-o", "max_tokens", "8", QUESTION],
            input=FAQ.read_text(),
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    print(f"\nllm: {done.stdout.strip()!r}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
