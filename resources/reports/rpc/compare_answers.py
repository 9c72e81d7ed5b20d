"""Are the answers over RPC workers the local ones? Two `specprefill ab --json` reports, case by case.

python resources/reports/rpc/compare_answers.py ab-local.json ab-rpc.json
"""

from __future__ import annotations

import json
import sys


def answers(path: str) -> dict[tuple[str, str], dict]:
    runs = {}
    for case in json.load(open(path))["cases"]:
        runs[(case["id"], "baseline")] = case["baseline"]
        for keep, spec in case["spec"].items():
            runs[(case["id"], f"keep {keep}")] = spec
    return runs


def main(local_path: str, rpc_path: str) -> int:
    local, rpc = answers(local_path), answers(rpc_path)
    same = 0
    for key in sorted(local):
        a, b = local[key]["answer"], rpc[key]["answer"]
        same += a == b
        print(f"{'same' if a == b else 'DIFFERENT':9} {key[0]} {key[1]} ({local[key].get('positions', '')}"
              f"{'/' + rpc[key].get('positions', '') if 'positions' in rpc[key] else ''})")
        if a != b:
            print(f"    local: {a[:200]!r}\n    rpc:   {b[:200]!r}")
    print(f"{same} of {len(local)} answers identical")
    return 0 if same == len(local) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
