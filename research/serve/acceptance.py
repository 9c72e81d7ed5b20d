"""`specprefill serve` on the real default models, checked as its users meet it: the `llm` CLI with a
long document piped in, hostile requests, a client that leaves, seeded sampling, and Ollama's client.

Starts the server on a free 127.0.0.1 port (background fill off, so nothing else shares the cores),
samples its resident memory every 0.2 s, runs each check once with bounded waits, and prints one
JSON object (also written to --json). Loopback only; every loop is bounded in count and time.

    python research/serve/acceptance.py --doc resources/samples/docs/xfig-howto.pdf --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import ollama
import openai
import psutil

QUESTION = "Who wrote this HOWTO? Give the name only."


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, required=True, help="the long document the llm check pipes in")
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    return parser.parse_args()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PeakMemory(threading.Thread):
    """The process's (and its children's) largest resident set, sampled every 0.2 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process, self.peak, self.done = psutil.Process(pid), 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            try:
                rss = self.process.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, rss)


def start_server(port: int) -> subprocess.Popen:
    from engine.core.children import child_env, python_command

    command = python_command("-m", "engine.cli", "serve", "--port", str(port), "--no-background-prefill")
    proc = subprocess.Popen(
        command, cwd=tempfile.mkdtemp(), env=child_env(), stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {proc.stderr.read()}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit("the server did not start in 600 s")


def metric(url: str, line_start: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def run_llm(url: str, model: str, stdin: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    home = Path(tempfile.mkdtemp())
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: sp\n  model_name: {model}\n  api_base: {url}/v1\n"
    )
    env = {**os.environ, "LLM_USER_PATH": str(home)}
    llm = Path(sys.executable).with_name("llm")
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(llm), "-m", "sp", "--no-log", *args],
        input=stdin,
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return done, time.perf_counter() - t0


def check_llm_long_document(url: str, model: str, doc: Path, memory: PeakMemory) -> dict:
    from engine.ingest import load_document

    text = load_document(doc).text
    spec_before = metric(url, "specprefill_kept_fraction_count")
    memory.peak = 0
    done, seconds = run_llm(url, model, text, "-u", "-o", "max_tokens", "32", QUESTION)
    usage = json.loads(done.stderr[done.stderr.index("{") :]) if "{" in done.stderr else {}
    spec = usage.get("specprefill", {})
    return {
        "chars": len(text),
        "exit": done.returncode,
        "answer": done.stdout.strip(),
        "seconds": round(seconds, 1),
        "answered_by_specprefill": metric(url, "specprefill_kept_fraction_count") == spec_before + 1,
        "usage_specprefill": spec,
        "draft_peak_gb": round(spec.get("selection", {}).get("draft_peak_bytes", 0) / 1e9, 2),
        "server_peak_rss_gb": round(memory.peak / 1e9, 2),
    }


def check_lone_surrogate(url: str, model: str) -> dict:
    raw = b'{"model": "%s", "messages": [{"role": "system", "content": "\\ud800"}, {"role": "user", "content": "Hi"}]}'
    first = httpx.post(
        url + "/v1/chat/completions",
        content=raw % model.encode(),
        headers={"content-type": "application/json"},
    )
    t0 = time.perf_counter()
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8}
    second = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    return {
        "first_status": first.status_code,
        "next_status": second.status_code,
        "next_seconds": round(time.perf_counter() - t0, 2),
        "next_answer": second.json()["choices"][0]["message"]["content"] if second.status_code == 200 else "",
    }


def check_long_stops(url: str, model: str) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "stop": ["x" * 200_000] * 4}
    result: dict = {}

    def send() -> None:
        t0 = time.perf_counter()
        response = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
        result.update(status=response.status_code, seconds=round(time.perf_counter() - t0, 3))

    sender = threading.Thread(target=send)
    sender.start()
    t0 = time.perf_counter()
    health = httpx.get(url + "/health", timeout=10)
    result["health_status"], result["health_seconds"] = health.status_code, round(time.perf_counter() - t0, 3)
    sender.join(130)
    return result


def check_metrics_bound(url: str) -> dict:
    path = "/" + "a" * 8192
    with httpx.Client(timeout=10) as client:
        statuses = {client.get(f"{url}{path}{i}").status_code for i in range(500)}
    return {"statuses": sorted(statuses), "metrics_bytes": len(httpx.get(url + "/metrics").content)}


def check_client_leaves(url: str, model: str) -> dict:
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "Count from 1 to 2000, one per line."}],
            "max_tokens": 4000,
        }
    ).encode()
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as raw:
        raw.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        time.sleep(3)
        running_at_3s = httpx.get(url + "/health").json()["running"]
    left = time.perf_counter()
    while time.perf_counter() - left < 20 and httpx.get(url + "/health").json()["running"]:
        time.sleep(0.1)
    return {
        "running_when_it_left": running_at_3s,
        "running_20s_later": httpx.get(url + "/health").json()["running"],
        "stopped_after_s": round(time.perf_counter() - left, 2),
    }


def check_seeded_sampling(url: str, model: str) -> dict:
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=300)
    messages = [{"role": "user", "content": "Write one sentence about the sea."}]
    answers = [
        client.chat.completions.create(
            model=model, messages=messages, temperature=0.8, top_p=0.9, seed=7, max_tokens=24
        )
        .choices[0]
        .message.content
        for _ in range(2)
    ]
    return {"answers": answers, "same": answers[0] == answers[1]}


def check_ollama(url: str, model: str) -> dict:
    client = ollama.Client(host=url, timeout=300)
    names = [m.model for m in client.list().models]
    messages = [{"role": "user", "content": "Name three colours."}]
    reply = client.chat(model=model, messages=messages, stream=False, options={"num_predict": 16})
    parts = list(client.chat(model=model, messages=messages, stream=True, options={"num_predict": 16}))
    return {
        "listed": names,
        "chat": reply.message.content,
        "stream_parts": len(parts),
        "stream_text": "".join(p.message.content for p in parts),
        "stream_done": parts[-1].done,
    }


def check_llm_temperature(url: str, model: str) -> dict:
    done, seconds = run_llm(
        url, model, "", "-o", "temperature", "0.7", "-o", "max_tokens", "16", "Say hello."
    )
    return {"exit": done.returncode, "answer": done.stdout.strip(), "seconds": round(seconds, 1)}


def main() -> int:
    args = parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(port)
    memory = PeakMemory(proc.pid)
    memory.start()
    try:
        model = httpx.get(url + "/v1/models").json()["data"][0]["id"]
        result = {"date": time.strftime("%Y-%m-%d"), "model": model, "cpu": cpu_name()}
        checks = [
            ("llm_long_document", lambda: check_llm_long_document(url, model, args.doc, memory)),
            ("lone_surrogate", lambda: check_lone_surrogate(url, model)),
            ("long_stops", lambda: check_long_stops(url, model)),
            ("metrics_bound", lambda: check_metrics_bound(url)),
            ("client_leaves", lambda: check_client_leaves(url, model)),
            ("seeded_sampling", lambda: check_seeded_sampling(url, model)),
            ("ollama", lambda: check_ollama(url, model)),
            ("llm_temperature", lambda: check_llm_temperature(url, model)),
        ]
        for name, check in checks:
            t0 = time.perf_counter()
            result[name] = check()
            print(f"{name} ({time.perf_counter() - t0:.1f} s): {result[name]}", file=sys.stderr, flush=True)
        result["same_server_process"] = proc.poll() is None
    finally:
        memory.done.set()
        proc.terminate()
        proc.wait(60)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


if __name__ == "__main__":
    sys.exit(main())
