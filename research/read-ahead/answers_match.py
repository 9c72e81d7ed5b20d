"""Does the first answer after the draft's read-ahead match the cold SpecPrefill answer?

The read-ahead only moves the draft's pass over the document to before the question, so the kept
chunks, and with greedy decoding the answer, should be the same. For each suite case (by default
the dev suite's look-up kinds, fact and number), one invocation runs a cold SpecPrefill
(`specprefill run --mode spec --force --json`) and, right after, `specprefill chat --mode spec
--json` on the same document and question, which reads ahead before asking. It prints one JSON
object: per case both answers, whether each is right by the suite's key, whether they are the same
text, the read-ahead answer's `served_by`, and both TTFTs.

    python research/read-ahead/answers_match.py --suite resources/eval/dev.jsonl --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, required=True, help="a JSONL suite (specprefill ab's format)")
    parser.add_argument("--only", default="fact,number", help="case kinds to run (default fact,number)")
    parser.add_argument("--keep", default="0.2", help="SpecPrefill's keep for both (default 0.2)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens to generate (default 32)")
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    return parser.parse_args()


def specprefill(*args: str) -> str:
    """`specprefill ARGS` in a child process that imports nothing from the current folder and
    fetches nothing; its stdout (its stderr passes through)."""
    from engine.core.children import child_env, python_command

    env = {**child_env(), "HF_HUB_OFFLINE": "1"}
    command = python_command("-m", "engine.cli", *args)
    return subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, env=env).stdout


def cold_spec(case, common: list[str]) -> dict:
    out = specprefill("run", "--doc", str(case.doc), "--question", case.question, "--mode", "spec", *common)
    return json.loads(out)["runs"]["spec"]


def after_read_ahead(case, common: list[str]) -> dict:
    out = specprefill(
        "chat",
        "--doc",
        str(case.doc),
        "--question",
        case.question,
        "--mode",
        "spec",
        "--no-background-prefill",
        *common,
    )
    return json.loads(out.splitlines()[-1])


def compare(case, cold: dict, warm: dict) -> dict:
    return {
        "id": case.id,
        "kind": case.kind,
        "same_answer": cold["answer"].strip() == warm["answer"].strip(),
        "cold": side(case, cold),
        "read_ahead": {**side(case, warm), "read_ahead_s": warm.get("read_ahead_s")},
    }


def side(case, run: dict) -> dict:
    """One run's answer, graded by the suite's key, with its TTFT and what served it."""
    from engine.eval.metrics import is_correct

    correct = is_correct(run["answer"], list(case.answers))
    return {
        "answer": run["answer"],
        "correct": correct,
        "ttft_s": run["ttft_s"],
        "served_by": run.get("served_by"),
    }


def main() -> int:
    from engine.eval.suite import load_suite

    args = parse_args()
    kinds = set(args.only.split(","))
    common = ["--keep", args.keep, "--force", "--max-new-tokens", str(args.max_new_tokens), "--json"]
    rows = []
    for case in (c for c in load_suite(args.suite) if c.kind in kinds and c.answers):
        rows.append(compare(case, cold_spec(case, common), after_read_ahead(case, common)))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result = {
        "keep": args.keep,
        "cases": rows,
        "same_answers": sum(r["same_answer"] for r in rows),
        "cold_correct": sum(r["cold"]["correct"] for r in rows),
        "read_ahead_correct": sum(r["read_ahead"]["correct"] for r in rows),
    }
    print(json.dumps(result, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
