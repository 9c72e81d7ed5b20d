"""Drafts and targets of another family, on real models: the SmolLM2-135M draft with the default
Qwen target, and the Gemma 3 270M target with the default Qwen draft. Both select through character
spans; both are assembled for the suite (`make test` runs `specprefill models --assemble`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from engine.draft.precision import PRECISION_ENV
from engine.models import defaults
from tests.integration.test_real_models import FACT, QUESTION

pytestmark = pytest.mark.real_models


def optional_model(key: str):
    path = defaults.verified_optional_path(key)
    if path is None:
        pytest.skip(f"{key} is not assembled: `specprefill models --assemble {key}` (make test does)")
    return path


def specprefill(*args: str) -> subprocess.CompletedProcess:
    """The CLI with the draft's format measured on this CPU (the suite's fixed int8 unset)."""
    env = {name: value for name, value in os.environ.items() if name != PRECISION_ENV}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, timeout=900, env=env
    )


def test_the_smollm2_draft_runs_both_modes_through_character_spans(real_models_ready, short_doc):
    draft = optional_model("smollm2-135m")
    proc = specprefill(
        "run", "--doc", str(short_doc), "--question", QUESTION, "--draft", str(draft),
        "--mode", "both", "--keep", "0.5", "--force", "--max-new-tokens", "24", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    base, spec = report["runs"]["baseline"], report["runs"]["spec"]
    assert FACT in base["answer"], base["answer"]
    assert spec["selection"] == "spans" and not spec["bypassed"]
    assert spec["draft_precision"] in ("int8", "bf16", "fp32") and spec["draft_s"] > 0
    assert 0.4 < spec["kept_fraction"] < 0.8 and spec["answer"].strip()


def test_a_gemma_target_answers_its_first_chat_question_after_the_read_ahead(real_models_ready, short_doc):
    target = optional_model("gemma3-270m")
    proc = specprefill(
        "chat", "--doc", str(short_doc), "--target", str(target), "--question", QUESTION,
        "--mode", "spec", "--keep", "0.5", "--force", "--max-new-tokens", "16", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (answer,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert answer["served_by"] == "spec_read_ahead" and answer["read_ahead_s"] > 0
    assert answer["selection"] == "spans"
    assert "[read-ahead] document" in proc.stderr and ", done (" in proc.stderr
