"""End to end on the real default models: a ~600-token prompt, both modes, both position modes."""

import json
import subprocess
import sys

import pytest

from engine.core.events import RunFinished, SelectionMade
from engine.core.settings import RunSettings
from engine.ingest import load_document
from engine.pipeline import Engine

pytestmark = pytest.mark.real_models
QUESTION = "Where is the zlib documentation (man pages, etc.)? Name the file."
FACT = "zlib.h"


def test_cli_both_modes_restore_positions_json_contract(real_models_ready, short_doc):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "run",
            "--doc",
            str(short_doc),
            "--question",
            QUESTION,
            "--mode",
            "both",
            "--keep",
            "0.5",
            "--positions",
            "restore",
            "--force",
            "--max-new-tokens",
            "40",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert 400 < report["prompt_tokens"] < 900
    base, spec = report["runs"]["baseline"], report["runs"]["spec"]
    for run in (base, spec):
        assert {"ttft_s", "prefill_tokens", "answer", "decode_tok_s"} <= run.keys()
        assert FACT in run["answer"], run["answer"]
        assert run["ttft_s"] > 0
    assert {
        "draft_s",
        "select_s",
        "target_prefill_s",
        "kept_fraction",
        "positions",
        "bypassed",
    } <= spec.keys()
    assert spec["positions"] == "restore" and spec["bypassed"] is False
    assert base["prefill_tokens"] == report["prompt_tokens"]
    assert spec["prefill_tokens"] < base["prefill_tokens"]
    assert 0.4 < spec["kept_fraction"] < 0.75
    assert spec["ttft_s"] >= spec["draft_s"] + spec["target_prefill_s"]


def test_engine_renumber_positions_and_selection(real_models_ready, short_doc):
    engine = Engine.load()
    try:
        assert engine.info.positions_supported, "the patched llama.cpp build must accept gapped positions"
        doc = load_document(short_doc)
        settings = RunSettings(keep=0.5, positions="renumber", force=True, max_new_tokens=40)
        events = list(engine.stream(doc, QUESTION, "spec", settings))
    finally:
        engine.close()
    result = next(e.result for e in events if isinstance(e, RunFinished))
    selection = next(e.selection for e in events if isinstance(e, SelectionMade))
    assert result.positions == "renumber"
    assert FACT in result.answer, result.answer
    n_chunks = len(selection.chunk_starts)
    assert 0 in selection.kept_chunks and n_chunks - 1 in selection.kept_chunks
    assert len(selection.token_char_offsets) == result.prompt_tokens
