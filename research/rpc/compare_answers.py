"""Are the answers over RPC workers the local ones? Two `specprefill ab --json` reports, case by case.

python research/rpc/compare_answers.py ab-local.json ab-rpc.json   (either may be a journal, .jsonl)
"""

from __future__ import annotations

import argparse
import json
import sys


def cases_of(path: str) -> list[dict]:
    """The cases of an `ab --json` report, or of an A/B journal (.jsonl: a header, then one case a line)."""
    if path.endswith(".jsonl"):
        return [json.loads(line) for line in open(path).read().splitlines()[1:] if line.strip()]
    return json.load(open(path))["cases"]


def answers(path: str) -> dict[tuple[str, str], dict]:
    runs = {}
    for case in cases_of(path):
        runs[(case["id"], "baseline")] = case["baseline"]
        for keep, spec in case["spec"].items():
            runs[(case["id"], f"keep {keep}")] = spec
    return runs


def main(local_path: str, rpc_path: str) -> int:
    local, rpc = answers(local_path), answers(rpc_path)
    same = 0
    for key in sorted(local.keys() & rpc.keys()):
        a, b = local[key]["answer"], rpc[key]["answer"]
        same += a == b
        print(
            f"{'same' if a == b else 'DIFFERENT':9} {key[0]} {key[1]} ({local[key].get('positions', '')}"
            f"{'/' + rpc[key].get('positions', '') if 'positions' in rpc[key] else ''})"
        )
        if a != b:
            print(f"    local: {a[:200]!r}\n    rpc:   {b[:200]!r}")
    compared = len(local.keys() & rpc.keys())
    print(f"{same} of {compared} answers identical")
    return 0 if same == compared else 1


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("local", help="the local run's `ab --json` report or journal")
    parser.add_argument("rpc", help="the run over RPC workers: report or journal")
    args = parser.parse_args(argv)
    return main(args.local, args.rpc)


if __name__ == "__main__":
    sys.exit(cli())
