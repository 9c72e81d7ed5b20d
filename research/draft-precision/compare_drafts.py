"""Correct answers of two A/B journals' SpecPrefill runs on the cases both hold, against the full
prefill's (the baselines are the first journal's):

    python research/draft-precision/compare_drafts.py \
        research/draft-precision/ab-fidelity-smollm2-keep02.journal.jsonl \
        research/fidelity/ab-fidelity-lookups-timing.journal.jsonl --keep 0.2
"""

from __future__ import annotations

import argparse
import json
from collections import Counter


def spec_runs(path: str, keep: str) -> dict[str, dict]:
    cases = {}
    with open(path) as lines:
        next(lines)  # the journal's header
        for line in lines:
            case = json.loads(line)
            run = case.get("spec", {}).get(keep)
            if run is not None and "correct" in run:
                cases[case["id"]] = {"kind": case["kind"], "full": case["baseline"]["correct"], "spec": run}
    return cases


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("journal")
    parser.add_argument("other")
    parser.add_argument("--keep", default="0.2")
    args = parser.parse_args()
    mine, other = spec_runs(args.journal, args.keep), spec_runs(args.other, args.keep)
    both = sorted(set(mine) & set(other))
    counts = Counter()
    for case in both:
        counts["full"] += mine[case]["full"]
        counts["this"] += mine[case]["spec"]["correct"]
        counts["other"] += other[case]["spec"]["correct"]
    kinds = Counter(mine[case]["kind"] for case in both)
    print(json.dumps({"cases": len(both), "kinds": dict(kinds), "correct": dict(counts)}, indent=1))


if __name__ == "__main__":
    main()
