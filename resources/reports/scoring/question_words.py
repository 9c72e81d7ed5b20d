"""Offline: do the question's words (BM25 over the chunks, engine/draft/question_words.py) keep more of
the answers' text than the draft's scores alone, at each keep and at keep=auto?

For each probe case: its prompt's chunks as the engine cuts them (the target's tokens), the engine's
own `question_word_scores`, and the draft's chunk scores as the engine reduces them by default (the
look-ahead and question rows alike, from `question_rows.py collect`'s DIR/ID.npz). Each weight ranks
the chunks with `ranked_with_words`; a case scores the share of its answer places kept
(aggregations.case_score). keep=auto's keep comes from the draft's scores, as in the engine.
Usage: HF_HUB_OFFLINE=1 python question_words.py ROWS.jsonl DIR [--json RESULT.json]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aggregations import case_score  # noqa: E402
from keep_policies import current, questions  # noqa: E402
from question_rows import every_row, load_cases  # noqa: E402

from engine.core.settings import ModelSettings, RunSettings  # noqa: E402
from engine.draft.question_words import ranked_with_words  # noqa: E402
from engine.eval.suite import load_suite  # noqa: E402
from engine.ingest import load_document  # noqa: E402
from engine.llama.prompt import token_char_offsets  # noqa: E402
from engine.pipeline import Engine  # noqa: E402
from engine.pipeline.selection_plan import question_word_scores  # noqa: E402

WEIGHTS = (0.0, 0.5, 1.0, 2.0, 100.0)  # 100: the words first, the draft only ordering the rest and ties
KEEPS = (0.1, 0.2, 0.3, "auto")
KINDS = ("all", "number", "fact", "multihop", "code", "count", "choice", "summary")


def word_scores(case_ids: set[str]) -> dict[str, np.ndarray]:
    """Each case's chunk match with its question's words, as the engine computes it."""
    suites = ("resources/eval/fidelity.jsonl", "resources/eval/dev.jsonl")
    cases = [c for suite in suites for c in load_suite(ROOT / suite) if c.id in case_ids]
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


def evaluate(cases: list[dict], words: dict[str, np.ndarray]) -> dict:
    """Per weight, kind and keep: the mean share of answer places kept; and auto's mean keep."""
    asked = questions()
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
        result[str(weight)] = {kind: {key: round(float(np.mean(v)), 3) for key, v in table[kind].items()}
                               for kind in KINDS if kind in table}
        result[str(weight)]["cases"] = {kind: len(table[kind]["0.1"]) for kind in KINDS if kind in table}
    return result


def main(argv: list[str]) -> None:
    rows_path, heads_dir = Path(argv[0]), Path(argv[1])
    cases = list(load_cases(rows_path, heads_dir))
    result = evaluate(cases, word_scores({c["id"] for c in cases}))
    print("weight  " + "  ".join(kind[:8].ljust(19) for kind in KINDS) + "  (keep 0.1/0.2/0.3/auto)")
    for weight, row in result.items():
        print(weight.ljust(7), "  ".join("/".join(f"{row[kind][str(k)]:.2f}" for k in KEEPS).ljust(19)
                                      for kind in KINDS), f"auto keep {row['all']['auto_keep']:.3f}")
    if "--json" in argv:
        Path(argv[argv.index("--json") + 1]).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
