"""Score `specprefill chat --json` answers against a suite's expected answers (engine.eval.metrics.is_correct).

Usage: python research/codebase-long/score_chat.py SUITE.jsonl ANSWERS.jsonl

One line per answer: the case, right or wrong, TTFT with its draft and target parts, the draft's
peak memory, how the run fit and which files it kept first; then the answer beside what was
expected, and the count right.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.eval.metrics import is_correct
from engine.eval.suite import load_suite


def main(suite_path: str, answers_path: str) -> int:
    cases = {case.question: case for case in load_suite(suite_path)}
    rows = [json.loads(line) for line in Path(answers_path).read_text().splitlines() if line.startswith("{")]
    right = 0
    for row in rows:
        case = cases[row["question"]]
        ok = is_correct(row["answer"], list(case.answers or ()))
        right += ok
        print(
            f"{case.id:40s} {'right' if ok else 'WRONG'}  TTFT {row['ttft_s']:.0f} s (draft {row['draft_s']:.0f} + "
            f"target {row['target_prefill_s']:.0f})  draft peak {row['draft_peak_mem_bytes'] / 1e9:.2f} GB  "
            f"fit {row['fit']}, saw {row['seen_fraction']:.1%}  first: {', '.join(row.get('focused_parts', []))}"
        )
        print(
            f"    expected {' | '.join(case.answers or ())}; answered: {' '.join(row['answer'].split())[:240]}"
        )
    print(f"{right} of {len(rows)} right")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", help="the suite the answers were asked from (SUITE.jsonl)")
    parser.add_argument(
        "answers", help="`specprefill chat --json` output, one JSON object a line (ANSWERS.jsonl)"
    )
    args = parser.parse_args(argv)
    return main(args.suite, args.answers)


if __name__ == "__main__":
    sys.exit(cli())
