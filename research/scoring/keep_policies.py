"""Offline: which way of choosing the keep per question (keep=auto) keeps the most answer text for
its mean keep, on the scores the engine now uses (look-ahead and question rows, every row alike)?

Input: the probe's rows (evidence and protected chunks) and `question_rows.py collect`'s DIR/ID.npz.
Each policy maps a case's chunk scores and question to a keep; a case scores the share of its answer
places kept at that keep (aggregations.case_score). The fixed keeps are the curve to beat: a policy
is worth having only if it keeps more answer text than a fixed keep of the same mean.
Usage: python research/scoring/keep_policies.py ROWS.jsonl DIR [--json RESULT.json] [--suite SUITE.jsonl ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path
from engine.core.settings import (
    AUTO_KEEP_BROAD,
    AUTO_KEEP_CEILING,
    AUTO_KEEP_FLOOR,
    AUTO_KEEP_JOINED,
    AUTO_LONG_LOOKUP_TOKENS,
    RunSettings,
)
from engine.draft.keep_policy import (
    SPREAD_HIGH,
    SPREAD_LOW,
    choose_keep,
    is_broad_question,
    score_spread,
    spread_position,
)
from engine.eval.suite import load_suite


def sibling(name: str):
    """The script `name`.py beside this one, as a module. research/ is no installed package (only the
    engine is), so the script is loaded from its file: no search path is changed."""
    key = f"research.{Path(__file__).parent.name}.{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).resolve().with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module  # before it runs: its dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[key]


case_score = sibling("aggregations").case_score
every_row, load_cases = sibling("question_rows").every_row, sibling("question_rows").load_cases
SUITES = [resource_path("eval", "fidelity.jsonl"), resource_path("eval", "dev.jsonl")]

FLOOR, CEILING, BROAD_KEEP = AUTO_KEEP_FLOOR, AUTO_KEEP_CEILING, AUTO_KEEP_BROAD


def questions(suites=SUITES) -> dict[str, str]:
    return {c.id: c.question for suite in suites for c in load_suite(suite)}


def free_scores(scores: np.ndarray, protected: list[int]) -> np.ndarray:
    return np.delete(np.asarray(scores, dtype=np.float64), protected)


def mass_share(scores: np.ndarray, protected: list[int], mass: float) -> float:
    """The share of the free chunks that, best first, hold `mass` of the free chunks' score."""
    free = np.sort(free_scores(scores, protected))[::-1]
    needed = int(np.searchsorted(np.cumsum(free), mass * free.sum())) + 1
    return needed / len(free)


def clipped(keep: float) -> float:
    return round(min(max(keep, FLOOR), CEILING), 3)


def fixed(keep):
    return lambda scores, protected, question: keep


def current(scores, protected, question):
    """The engine's keep=auto today (engine/draft/keep_policy.py); the prompt's length counted as its
    chunks' (the last one's shortness does not matter at the long-look-up threshold)."""
    return choose_keep(
        scores,
        protected,
        question,
        FLOOR,
        CEILING,
        broad_keep=BROAD_KEEP,
        joined_keep=AUTO_KEEP_JOINED,
        prompt_tokens=len(scores) * RunSettings.chunk_size,
        long_tokens=AUTO_LONG_LOOKUP_TOKENS,
    ).keep


def by_mass(mass, scale=1.0):
    """The share of chunks that hold `mass` of the score, times `scale`, clipped; broad: BROAD_KEEP."""

    def policy(scores, protected, question):
        if is_broad_question(question):
            return BROAD_KEEP
        return clipped(scale * mass_share(scores, protected, mass))

    return policy


def by_spread(low, high):
    """The engine's spread map (broad questions aside), with its bounds or others."""

    def policy(scores, protected, question):
        if is_broad_question(question):
            return BROAD_KEEP
        t = spread_position(score_spread(scores, protected), low, high)
        return round(FLOOR + t * (CEILING - FLOOR), 3)

    return policy


POLICIES = {f"fixed {k}": fixed(k) for k in (0.1, 0.15, 0.2, 0.25, 0.3)}
POLICIES["auto (engine)"] = current
POLICIES["auto, spread only"] = by_spread(SPREAD_LOW, SPREAD_HIGH)  # the engine's until 2026-12-04
POLICIES.update(
    {f"spread {lo}-{hi}": by_spread(lo, hi) for lo, hi in ((0.15, 0.3), (0.2, 0.35), (0.15, 0.45))}
)
POLICIES.update({f"mass {m}": by_mass(m) for m in (0.3, 0.4, 0.5, 0.6)})
POLICIES.update({f"mass {m} x{s}": by_mass(m, s) for m, s in ((0.5, 0.5), (0.6, 0.5), (0.8, 0.5))})


def evaluate(cases, asked):
    """{policy: {"all" or kind: {"kept": mean answer share, "keep": mean keep, "token_keep": keep
    weighted by prompt tokens (what the target's prefill time follows)}}}."""
    table = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for case in cases:
        scores = every_row(case)
        for name, policy in POLICIES.items():
            keep = policy(scores, case["protected"], asked[case["id"]])
            for group in ("all", case["kind"]):
                cell = table[name][group]
                cell["kept"].append(case_score(case, scores, keep))
                cell["keep"].append(keep)
                cell["tokens"].append(case["tokens"])
    return {name: {group: summary(cell) for group, cell in groups.items()} for name, groups in table.items()}


def summary(cell) -> dict:
    keeps, tokens = np.array(cell["keep"]), np.array(cell["tokens"], dtype=float)
    return {
        "cases": len(keeps),
        "kept": round(float(np.mean(cell["kept"])), 3),
        "keep": round(float(keeps.mean()), 3),
        "token_keep": round(float((keeps * tokens).sum() / tokens.sum()), 3),
    }


def print_table(result) -> None:
    kinds = sorted(next(iter(result.values())), key=lambda k: (k != "all", k))
    print("answer text kept / mean keep, by policy (rows) and kind (columns)")
    print(
        "".ljust(18)
        + "".join(f"{k} ({result['fixed 0.2'][k]['cases']})".ljust(16) for k in kinds)
        + "token-weighted keep"
    )
    for name, groups in result.items():
        cells = [f"{groups[k]['kept']:.2f} / {groups[k]['keep']:.2f}" for k in kinds]
        print(name.ljust(18) + "".join(c.ljust(16) for c in cells) + f"{groups['all']['token_keep']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="the keep-auto probe's rows (probe-rows.jsonl)")
    parser.add_argument("heads_dir", type=Path, metavar="DIR", help="`question_rows.py collect`'s DIR/ID.npz")
    parser.add_argument("--json", type=Path, metavar="RESULT.json")
    parser.add_argument(
        "--suite",
        type=Path,
        action="append",
        help="the suites holding the cases' questions (repeatable; default: fidelity.jsonl and dev.jsonl)",
    )
    args = parser.parse_args(argv)
    cases = list(load_cases(args.rows, args.heads_dir))
    result = evaluate(cases, questions(args.suite or SUITES))
    print_table(result)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
