"""The CLI's JSON contracts (run, bench, calibrate/estimate), end to end on the tiny GGUF pair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.tiny_gguf import write_tiny_pair

ROOT = Path(__file__).resolve().parents[2]
DOC = " ".join(f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(12))


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    home = tmp_path_factory.mktemp("cli")
    target, draft = write_tiny_pair(home / "models")
    doc = home / "doc.txt"
    doc.write_text(DOC)
    env = dict(os.environ, XDG_CACHE_HOME=str(home / "cache"), HF_HUB_OFFLINE="1")
    models = ["--target", str(target), "--draft", str(draft), "--threads", "1", "--n-ctx", "1024"]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "engine.cli", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run, models, doc


@pytest.mark.slow
def test_run_json_contract(cli):
    run, models, doc = cli
    proc = run(
        "run",
        "--doc",
        str(doc),
        "--question",
        "Which item is green?",
        "--mode",
        "both",
        "--force",
        "--keep",
        "0.3",
        "--chunk-size",
        "8",
        "--max-new-tokens",
        "4",
        "--json",
        *models,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    base, spec = report["runs"]["baseline"], report["runs"]["spec"]
    assert report["prompt_tokens"] == base["prefill_tokens"] > spec["prefill_tokens"]
    for key in ("ttft_s", "prefill_tokens", "answer", "decode_tok_s"):
        assert key in base and key in spec
    for key in ("draft_s", "select_s", "kept_fraction", "positions", "bypassed"):
        assert key in spec and key not in base
    assert "target_prefill_s" in spec
    assert spec["positions"] == "restore" and spec["bypassed"] is False


@pytest.mark.slow
def test_run_a_document_longer_than_the_window_json_contract(cli, tmp_path):
    """`run --mode spec` needs no flag on a document longer than the window; `--mode both` cuts the
    full prefill and labels it; both runs say how much of the document they saw."""
    run, models, _ = cli
    long_doc = tmp_path / "long.txt"
    long_doc.write_text(DOC * 12)
    base_args = (
        "run",
        "--doc",
        str(long_doc),
        "--question",
        "Which item is green?",
        "--keep",
        "0.2",
        "--chunk-size",
        "8",
        "--max-new-tokens",
        "4",
        "--json",
        *models,
    )
    spec_only = run(*base_args, "--mode", "spec")
    assert spec_only.returncode == 0, spec_only.stderr
    proc = run(*base_args, "--mode", "both")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    base, spec = report["runs"]["baseline"], report["runs"]["spec"]
    assert report["prompt_tokens"] > 1024
    assert base["fit"] == "truncated" and spec["fit"] == "selected"
    assert base["document_tokens"] == spec["document_tokens"] > 1024
    assert 0 < base["seen_fraction"] < 1 and 0 < spec["seen_fraction"] < 1
    assert base["truncated_tokens"] > 0 and spec["positions"] == "renumber"
    assert spec["prefill_tokens"] <= 1024 - 4
    refused = run(*base_args, "--mode", "baseline")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--mode spec" in refused.stderr


@pytest.mark.slow
def test_run_spec_below_threshold_is_bypassed(cli):
    run, models, doc = cli
    proc = run(
        "run",
        "--doc",
        str(doc),
        "--question",
        "Which item is green?",
        "--mode",
        "spec",
        "--max-new-tokens",
        "2",
        "--json",
        *models,
    )
    spec = json.loads(proc.stdout)["runs"]["spec"]
    assert spec["bypassed"] is True and spec["kept_fraction"] == 1.0


@pytest.mark.slow
def test_bench_json_contract(cli, tmp_path):
    run, models, doc = cli
    plot = tmp_path / "ttft.png"
    proc = run(
        "bench",
        "--doc",
        str(doc),
        "--lengths",
        "64,160",
        "--keep",
        "0.25",
        "--chunk-size",
        "8",
        "--draft-window",
        "32",
        "--json",
        "--plot",
        str(plot),
        *models,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["results"]
    assert [r["tokens"] for r in rows] == [64, 160]
    for r in rows:
        for key in ("tokens", "baseline_ttft_s", "spec_ttft_s", "draft_s", "target_prefill_s", "speedup"):
            assert key in r
        assert r["speedup"] == pytest.approx(r["baseline_ttft_s"] / r["spec_ttft_s"])
        assert r["prompt_tokens"] > r["tokens"]  # the chat template and the question come on top
        assert r["draft_window"] == 32
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "key"), [("--read-ahead", "read_ahead"), ("--sessions", "sessions")])
def test_bench_session_paths_json_contracts(cli, flag, key):
    run, models, doc = cli
    proc = run(
        "bench",
        flag,
        "--doc",
        str(doc),
        "--lengths",
        "160",
        "--keep",
        "0.25",
        "--chunk-size",
        "8",
        "--json",
        *models,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["tokens"] for r in data[key]] == [160]
    assert data["doc"] == str(doc) and data["keep"] == 0.25 and data["models"]["target"]
    if key == "read_ahead":
        assert data[key][0]["read_ahead_served_by"] == "spec_read_ahead"


@pytest.mark.slow
def test_calibrate_then_estimate(cli):
    run, models, doc = cli
    proc = run("estimate", "--tokens", "8192", "--keep", "0.2", "--json")
    assert proc.returncode == 2 and "calibrate" in proc.stderr  # not calibrated yet
    proc = run("calibrate", "--doc", str(doc), "--lengths", "64,128,256", "--json", *models)
    assert proc.returncode == 0, proc.stderr
    assert Path(json.loads(proc.stdout)["path"]).is_file()
    est = json.loads(run("estimate", "--tokens", "8192", "--keep", "0.2", "--json").stdout)
    assert est["tokens"] == 8192 and est["baseline_ttft_s"] > 0
    assert (
        not est["fits"] and est["kept_tokens"] < 8192 * 0.2
    )  # the calibration recorded the tiny target's window
    assert est["speedup"] == pytest.approx(est["baseline_ttft_s"] / est["spec_ttft_s"])
    full = json.loads(
        run("estimate", "--tokens", "8192", "--keep", "0.2", "--draft-window", "0", "--json").stdout
    )
    assert (est["draft_window"], full["draft_window"]) == (4096, 0)
    assert full["draft_s"] >= est["draft_s"] and full["baseline_ttft_s"] == est["baseline_ttft_s"]
