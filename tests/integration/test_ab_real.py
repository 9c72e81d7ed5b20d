"""`specprefill ab` end to end on the real default models: a 2-case suite on ~500-token excerpts."""

import json
import subprocess
import sys

import pytest

from tests.integration.conftest import FAQ

pytestmark = pytest.mark.real_models
CLI = [sys.executable, "-m", "engine.cli"]

# Two short excerpts of the zlib FAQ, and a question whose answer each one states.
EXCERPTS = {
    "faq-start.txt": (0, 2000),  # FAQ 1-6: "Where's the zlib documentation?" -> "It's in zlib.h"
    "faq-license.txt": (6000, 8000),  # FAQ 24: altering 1.2.3.4 -> "change ZLIB_VERNUM to 0x123f"
}
CASES = [
    {
        "id": "zlib-docs",
        "kind": "fact",
        "doc": "faq-start.txt",
        "question": "Where is the zlib documentation (man pages, etc.)? Name the file.",
        "answers": ["zlib.h"],
    },
    {
        "id": "zlib-vernum",
        "kind": "number",
        "doc": "faq-license.txt",
        "question": "If the base zlib version you are altering is 1.2.3.4, what should ZLIB_VERNUM be changed to?",
        "answers": ["0x123f"],
    },
]


@pytest.fixture
def mini_suite(tmp_path):
    text = FAQ.read_text()
    for name, (start, end) in EXCERPTS.items():
        (tmp_path / name).write_text(text[start:end])
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(case) + "\n" for case in CASES))
    return suite


def test_ab_json_contract_on_real_models(real_models_ready, mini_suite, tmp_path):
    report_path = tmp_path / "ab.html"
    proc = subprocess.run(
        [
            *CLI,
            "ab",
            "--suite",
            str(mini_suite),
            "--keep",
            "0.5",
            "--force",
            "--max-new-tokens",
            "32",
            "--json",
            "--report",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"summary", "cases", "environment"}

    summary = report["summary"]
    assert summary["n_cases"] == 2 and summary["keeps"] == ["0.5"]
    baseline, spec = summary["baseline"], summary["spec"]["0.5"]
    assert baseline["n_scored"] == 2 and 0.0 <= baseline["accuracy"] <= 1.0
    flags = [case["baseline"]["correct"] for case in report["cases"]]
    assert baseline["accuracy"] == pytest.approx(sum(flags) / len(flags))
    assert {
        "accuracy",
        "agreement",
        "mean_ttft_s",
        "mean_kept_fraction",
        "speedup",
        "n_bypassed",
    } <= spec.keys()
    assert spec["n_bypassed"] == 0 and 0.4 < spec["mean_kept_fraction"] < 0.75
    assert set(summary["by_kind"]) == {"fact", "number"}

    for case in report["cases"]:
        assert 300 < case["prompt_tokens"] < 900
        assert {"answer", "correct", "ttft_s", "tokenize_s", "target_prefill_s"} <= case["baseline"].keys()
        run = case["spec"]["0.5"]
        assert {
            "answer",
            "correct",
            "agreement",
            "ttft_s",
            "draft_s",
            "select_s",
            "target_prefill_s",
            "kept_fraction",
            "positions",
            "bypassed",
        } <= run.keys()
        assert run["positions"] == "restore" and 0.0 <= run["agreement"] <= 1.0

    env = report["environment"]
    assert env["target"]["sha256"] and env["draft"]["sha256"] and env["positions_used"] == "restore"
    assert env["restore_supported"] is True and env["threads"] and env["versions"]["llama_cpp_python"]
    assert report_path.read_text().count("data:image/png;base64,") == 2
