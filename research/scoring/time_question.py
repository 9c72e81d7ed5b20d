"""Draft cost of scoring with the question's rows: the same prompts scored with and without, alternating.

Usage: python research/scoring/time_question.py CASE_ID[,CASE_ID] [--suite SUITE.jsonl]
(ids of resources/eval/fidelity.jsonl by default); one JSON line a pass."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from engine.core.resources import resource_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", help="case ids, comma-separated")
    parser.add_argument("--suite", type=Path, default=resource_path("eval", "fidelity.jsonl"))
    args = parser.parse_args(argv)

    from engine.core.settings import ModelSettings, RunSettings
    from engine.core.steps import run_to_end
    from engine.draft.scorer import ScoringParams
    from engine.eval.suite import load_suite
    from engine.ingest import load_document
    from engine.pipeline import Engine

    cases = {c.id: c for c in load_suite(args.suite)}
    engine = Engine.load(ModelSettings())
    settings = RunSettings()
    try:
        for cid in args.ids.split(","):
            case = cases[cid]
            prompt = engine.prepare(load_document(case.doc).text, case.question, settings)
            tokens = prompt.tokens.tolist()
            for rep in range(2):
                for on in (False, True) if rep == 0 else (True, False):
                    params = ScoringParams.from_settings(
                        replace(settings, score_question=on), prompt.question_rows
                    )
                    t0 = time.perf_counter()
                    run_to_end(engine.scorer.iter_score(tokens, params))
                    row = {
                        "id": cid,
                        "tokens": len(tokens),
                        "question_rows": prompt.question_rows,
                        "on": on,
                        "s": round(time.perf_counter() - t0, 2),
                    }
                    print(json.dumps(row), flush=True)
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
