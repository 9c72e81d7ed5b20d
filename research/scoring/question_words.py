"""Offline: do the question's words (BM25 over the chunks, engine/draft/question_words.py) keep more of
the answers' text than the draft's scores alone, at each keep and at keep=auto?

For each probe case: its prompt's chunks as the engine cuts them (the target's tokens), the engine's
own `question_word_scores`, and the draft's chunk scores as the engine reduces them by default (the
look-ahead and question rows alike, from `question_rows.py collect`'s DIR/ID.npz). Each weight ranks
the chunks with `ranked_with_words`; a case scores the share of its answer places kept
(aggregations.case_score). keep=auto's keep comes from the draft's scores, as in the engine.
Usage: HF_HUB_OFFLINE=1 python research/scoring/question_words.py ROWS.jsonl DIR [--json RESULT.json] [--suite SUITE.jsonl ...]
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
from engine.draft.question_words import ranked_with_words
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
current, questions = sibling("keep_policies").current, sibling("keep_policies").questions
every_row, load_cases = sibling("question_rows").every_row, sibling("question_rows").load_cases
SUITES = [resource_path("eval", "fidelity.jsonl"), resource_path("eval", "dev.jsonl")]

WEIGHTS = (0.0, 0.5, 1.0, 2.0, 100.0)  # 100: the words first, the draft only ordering the rest and ties
KEEPS = (0.1, 0.2, 0.3, "auto")
KINDS = ("all", "number", "fact", "multihop", "code", "count", "choice", "summary")


def word_scores(case_ids: set[str], suites=SUITES) -> dict[str, np.ndarray]:
    """Each case's chunk match with its question's words, as the engine computes it."""
    from engine.core.settings import ModelSettings, RunSettings
    from engine.ingest import load_document
    from engine.llama.prompt import token_char_offsets
    from engine.pipeline import Engine
    from engine.pipeline.selection_plan import question_word_scores

    cases = [c for suite in suites for c in load_suite(suite) if c.id in case_ids]
    settings, docs, out = RunSettings(), {}, {}
    engine = Engine.load(ModelSettings())
    try:
        for case in cases:
            doc = docs.setdefault(case.doc, load_document(case.doc))
            prompt = engine.prepare(doc.text, case.question, settings)
            offsets = token_char_offsets(engine.runtime.model, prompt)
            out[case.id] = question_word_scores(prompt, offsets, settings.chunk_size)
    finally:
        engine.close()
    return out


def evaluate(cases: list[dict], words: dict[str, np.ndarray], suites=SUITES) -> dict:
    """Per weight, kind and keep: the mean share of answer places kept; and auto's mean keep."""
    asked = questions(suites)
    result = {}
    for weight in WEIGHTS:
        table = defaultdict(lambda: defaultdict(list))
        for case in cases:
            draft = every_row(case)
            ranking = ranked_with_words(draft, words[case["id"]], weight)
            for keep in KEEPS:
                k = current(draft, case["protected"], asked[case["id"]]) if keep == "auto" else keep
                score = case_score(case, ranking, k)
                table["all"][str(keep)].append(score)
                table[case["kind"]][str(keep)].append(score)
                if keep == "auto":
                    table["all"]["auto_keep"].append(k)
        result[str(weight)] = {
            kind: {key: round(float(np.mean(v)), 3) for key, v in table[kind].items()}
            for kind in KINDS
            if kind in table
        }
        result[str(weight)]["cases"] = {kind: len(table[kind]["0.1"]) for kind in KINDS if kind in table}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="the keep-auto probe's rows (probe-rows.jsonl)")
    parser.add_argument("heads_dir", type=Path, metavar="DIR", help="`question_rows.py collect`'s DIR/ID.npz")
    parser.add_argument("--json", type=Path, metavar="RESULT.json")
    parser.add_argument(
        "--suite",
        type=Path,
        action="append",
        help="the suites holding the cases (repeatable; default: fidelity.jsonl and dev.jsonl)",
    )
    args = parser.parse_args(argv)
    suites = args.suite or SUITES
    cases = list(load_cases(args.rows, args.heads_dir))
    result = evaluate(cases, word_scores({c["id"] for c in cases}, suites), suites)
    print("weight  " + "  ".join(kind[:8].ljust(19) for kind in KINDS) + "  (keep 0.1/0.2/0.3/auto)")
    for weight, row in result.items():
        print(
            weight.ljust(7),
            "  ".join("/".join(f"{row[kind][str(k)]:.2f}" for k in KEEPS).ljust(19) for kind in KINDS),
            f"auto keep {row['all']['auto_keep']:.3f}",
        )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
