"""The `llm` CLI against `specprefill serve` (fake engine), configured as llm's docs say for an
OpenAI-compatible server (extra-openai-models.yaml): a document piped in with the question on the
command line, and a sampling option."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.children import owned_cwd
from tests.unit.serve_harness import DOC, MODEL, Server, fake  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow
LLM = Path(sys.executable).with_name("llm")


def configure_llm(home: Path, url: str) -> dict[str, str]:
    """llm's user folder with this server as model `sp`, and the environment that points llm at it."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "extra-openai-models.yaml").write_text(
        f"- model_id: sp\n  model_name: {MODEL}\n  api_base: {url}/v1\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    return {**env, "LLM_USER_PATH": str(home)}


def ask_llm(env: dict[str, str], stdin: str, *args: str) -> subprocess.CompletedProcess:
    with owned_cwd() as cwd:
        return subprocess.run(
            [str(LLM), "-m", "sp", "--no-log", *args],
            input=stdin,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )


def test_llm_answers_a_piped_document_with_its_question(fake, tmp_path):
    with Server(fake) as running:
        env = configure_llm(tmp_path / "llm", running.url)
        done = ask_llm(env, DOC + "\n", "Where is the green stone?")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "The green stone."
        call = fake.calls[0]
        assert call["document"].strip() == DOC.strip() and call["question"] == "Where is the green stone?"
        assert call["settings"].temperature == 0.0  # greedy unless asked

        sampled = ask_llm(env, DOC + "\n", "-o", "temperature", "0.7", "Where is it?")
        assert sampled.returncode == 0, sampled.stderr
        assert fake.calls[1]["settings"].temperature == 0.7
        assert fake.calls[1]["session"] is call["session"]  # the same document: the same cached session
