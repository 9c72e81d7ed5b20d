"""TTFT of one SpecPrefill request through `specprefill serve` against the same request on the CLI.

The document is the first TOKENS tokens of DOC's text (as `specprefill bench` cuts it), written to
a text file that the CLI reads and the server receives in the first user message, before a blank
line and the question (the server's rule for what the document is: docs/serve.md). Both run cold,
with mode spec and the same keep, one after the other in one invocation: the server first (on a
free 127.0.0.1 port, background fill off), then `specprefill run --mode spec --json`. Prints one
JSON object with both TTFTs and their ratio.

    python research/serve/serve_vs_cli.py --doc resources/samples/docs/mpfi.pdf --tokens 8192 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "What does this document describe? Answer in one sentence."


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, required=True, help="a PDF, text file or code folder")
    parser.add_argument(
        "--tokens", type=int, default=8192, help="document length in target tokens (default 8192)"
    )
    parser.add_argument("--keep", default="0.2", help="SpecPrefill's keep for both (default 0.2)")
    parser.add_argument("--max-new-tokens", type=int, default=8, help="tokens to generate (default 8)")
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    return parser.parse_args()


def cut_document(doc: Path, tokens: int) -> str:
    from engine.api import ModelSettings, load_engine
    from engine.ingest import load_document

    text = load_document(doc).text
    engine = load_engine(ModelSettings())
    try:
        return engine.detokenize(engine.sample_tokens(text, tokens, "document"))
    finally:
        engine.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env() -> dict[str, str]:
    """The engine's environment for a Python child (engine.core.children), fetching nothing."""
    from engine.core.children import child_env as engine_child_env

    return {**engine_child_env(), "HF_HUB_OFFLINE": "1"}


def wait_for_health(port: int, server: subprocess.Popen, timeout: float = 600) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server ended with {server.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise TimeoutError("the server did not answer /health in time")


def server_ttft(document: str, args: argparse.Namespace, workdir: Path) -> dict:
    from openai import OpenAI

    port = free_port()
    keep = args.keep if args.keep == "auto" else float(args.keep)
    server = subprocess.Popen(
        [
            sys.executable,
            "-P",
            "-m",
            "engine.cli",
            "serve",
            "--port",
            str(port),
            "--force",
            "--no-background-prefill",
            "--max-new-tokens",
            str(args.max_new_tokens),
        ],
        cwd=workdir,
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_health(port, server)
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", timeout=1800)
        model = client.models.list().data[0].id
        reply = client.chat.completions.create(
            model=model,
            max_tokens=args.max_new_tokens,
            messages=[{"role": "user", "content": f"{document}\n\n{QUESTION}"}],
            extra_body={"specprefill": {"mode": "spec", "keep": keep}},
        )
        return dict(
            reply.usage.model_dump()["specprefill"],
            prompt_tokens=reply.usage.prompt_tokens,
            answer=reply.choices[0].message.content,
        )
    finally:
        server.terminate()
        server.wait(timeout=60)


def cli_ttft(document_file: Path, args: argparse.Namespace, workdir: Path) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "engine.cli",
            "run",
            "--doc",
            str(document_file),
            "--question",
            QUESTION,
            "--mode",
            "spec",
            "--force",
            "--keep",
            args.keep,
            "--max-new-tokens",
            str(args.max_new_tokens),
            "--json",
        ],
        cwd=workdir,
        env=child_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(done.stdout)
    spec = data["runs"]["spec"]
    return dict(
        ttft_s=spec["ttft_s"],
        kept_fraction=spec["kept_fraction"],
        positions=spec["positions"],
        prompt_tokens=data["prompt_tokens"],
        answer=spec["answer"],
    )


def main() -> int:
    args = parse_args()
    document = cut_document(args.doc, args.tokens)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        document_file = workdir / "document.txt"
        document_file.write_text(document, encoding="utf-8")
        served = server_ttft(document, args, workdir)
        cli = cli_ttft(document_file, args, workdir)
    result = {
        "doc": str(args.doc),
        "tokens": args.tokens,
        "keep": args.keep,
        "server": served,
        "cli": cli,
        "server_over_cli": served["ttft_s"] / cli["ttft_s"],
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
