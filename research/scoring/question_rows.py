"""Offline: does scoring with the question's own queries (SnapKV's observation window) keep more of
the answers' text than the look-ahead alone?

collect: for each case of `probe-rows.jsonl` (the keep-auto probe's rows, which hold each answer's
evidence chunks and the protected chunks), run the draft once with `ScoringParams.question_rows`
covering the question and the assistant header, and save DIR/ID.npz: per look-ahead step and per
question row, the chunk means of the row's max over layers x heads, for the layers from 0, 8 and 12
on. evaluate: reduce them in several ways and compare with the reference (look-ahead only, every
layer) on whether the answer's text would be kept (aggregations.case_score).
Usage: python research/scoring/question_rows.py collect ROWS.jsonl DIR [--suite SUITE.jsonl ...]
       python research/scoring/question_rows.py evaluate ROWS.jsonl DIR [--json RESULT.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path


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


aggregations = sibling("aggregations")
SUITES = [resource_path("eval", "fidelity.jsonl"), resource_path("eval", "dev.jsonl")]
FIRST_LAYERS = (0, 8, 12)


class RowRecorder:
    """Wraps the scorer's reductions: each look-ahead step's rows and the question's rows, as chunk
    means of their max over the layers from each of FIRST_LAYERS on."""

    def __init__(self, chunk_size: int, heads: int):
        import engine.draft.scorer as scorer_mod
        from engine.draft.selection import smooth_rows

        self.chunk_size, self.heads, self.smooth = chunk_size, heads, smooth_rows
        self.steps, self.question = [], None
        self._step_importance = scorer_mod.step_importance
        self._question_importance = scorer_mod._QuestionRows.importance
        scorer_mod.step_importance = self.record_step
        recorder = self

        def record_question(rows_self):
            per_layer = np.stack(
                [
                    np.concatenate([r.numpy() for r in rows_self.rows[layer]])
                    for layer in sorted(rows_self.rows)
                ]
            )  # (layers, rows, n)
            recorder.question = recorder.by_first_layer(per_layer)
            return recorder._question_importance(rows_self)

        scorer_mod._QuestionRows.importance = record_question

    def by_first_layer(self, per_layer: np.ndarray) -> np.ndarray:
        """(layers, rows, n) -> (len(FIRST_LAYERS), rows, chunks)."""
        from engine.draft.selection import chunk_scores

        return np.stack(
            [chunk_scores(per_layer[first:].max(axis=0), self.chunk_size) for first in FIRST_LAYERS]
        )

    def record_step(self, rows, kernel):
        pooled = self.smooth(rows, kernel).float().numpy()  # (layers * heads, n)
        per_layer = pooled.reshape(-1, self.heads, pooled.shape[-1]).max(axis=1)[:, None]  # (layers, 1, n)
        self.steps.append(self.by_first_layer(per_layer)[:, 0])
        return self._step_importance(rows, kernel)

    def save(self, path: Path, **meta) -> None:
        np.savez_compressed(
            path,
            steps=np.stack(self.steps, axis=1).astype(np.float32),
            question=self.question.astype(np.float32),
            **meta,
        )
        self.steps, self.question = [], None


def collect(rows_path: Path, out_dir: Path, suites=SUITES) -> None:
    from engine.core.settings import ModelSettings, RunSettings
    from engine.core.steps import run_to_end
    from engine.draft.scorer import DraftPrefix, ScoringParams
    from engine.eval.suite import load_suite
    from engine.ingest import load_document
    from engine.pipeline import Engine

    rows = {r["id"]: r for r in map(json.loads, rows_path.read_text().splitlines())}
    cases = [c for suite in suites for c in load_suite(suite) if c.id in rows]
    by_doc = defaultdict(list)
    for case in cases:
        by_doc[case.doc].append(case)
    out_dir.mkdir(parents=True, exist_ok=True)
    engine = Engine.load(ModelSettings())
    base = RunSettings()
    recorder = RowRecorder(base.chunk_size, engine.scorer.model.config.num_attention_heads)
    for doc_path, doc_cases in by_doc.items():
        doc = load_document(doc_path)
        prefix = None
        for case in doc_cases:
            prompt = engine.prepare(doc.text, case.question, base)
            if prefix is None:
                prefix = DraftPrefix(prompt.tokens[: prompt.tail_start].copy(), base.draft_window)
            params = ScoringParams.from_settings(replace(base, score_question=True), prompt.question_rows)
            start = time.perf_counter()
            score = run_to_end(engine.scorer.iter_score(prompt.tokens.tolist(), params, prefix=prefix))
            recorder.save(
                out_dir / f"{case.id}.npz",
                importance=score.importance.astype(np.float32),
                question_tokens=params.question_rows,
            )
            print(
                case.id,
                prompt.n_tokens,
                params.question_rows,
                f"{time.perf_counter() - start:.1f} s",
                flush=True,
            )
    engine.close()


def lookahead(case, first=0):
    return case["steps"][FIRST_LAYERS.index(first)].mean(axis=0)


def question(case, first=0, drop_template=0):
    rows = case["question"][FIRST_LAYERS.index(first)]
    return rows[: len(rows) - drop_template].mean(axis=0)


def halves(case, first=0, weight=0.5):
    return (1 - weight) * lookahead(case, first) + weight * question(case, first)


def every_row(case, first=0):
    return np.concatenate(
        [case["steps"][FIRST_LAYERS.index(first)], case["question"][FIRST_LAYERS.index(first)]]
    ).mean(axis=0)


def rank_sum(case, first=0):
    """Each half's chunks as percentiles, then their mean: neither half wins by its scale alone."""

    def percentile(scores):
        return scores.argsort().argsort() / max(len(scores) - 1, 1)

    return (percentile(lookahead(case, first)) + percentile(question(case, first))) / 2


AGGREGATIONS = {
    "look-ahead (reference)": lookahead,
    "question rows only": question,
    "question rows, no template": lambda c: question(c, drop_template=5),
    "halves": halves,
    "quarter question": lambda c: halves(c, weight=0.25),
    "three quarters question": lambda c: halves(c, weight=0.75),
    "every row alike": every_row,
    "rank halves": rank_sum,
    "look-ahead, layers 12+": lambda c: lookahead(c, 12),
    "halves, layers 8+": lambda c: halves(c, 8),
    "halves, layers 12+": lambda c: halves(c, 12),
    "question rows, layers 12+": lambda c: question(c, 12),
}


def load_cases(rows_path: Path, out_dir: Path):
    for row in map(json.loads, rows_path.read_text().splitlines()):
        npz = out_dir / f"{row['id']}.npz"
        if not npz.exists() or not row.get("evidence") or not any(row["evidence"]):
            continue
        data = np.load(npz)
        yield dict(row, steps=data["steps"], question=data["question"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("verb", choices=("collect", "evaluate"))
    parser.add_argument("rows", type=Path, help="the keep-auto probe's rows (probe-rows.jsonl)")
    parser.add_argument(
        "out_dir", type=Path, metavar="DIR", help="DIR/ID.npz: written by collect, read by evaluate"
    )
    parser.add_argument("--json", type=Path, metavar="RESULT.json", help="evaluate: the result as JSON")
    parser.add_argument(
        "--suite",
        type=Path,
        action="append",
        help="collect: a suite holding the rows' cases (repeatable; default: fidelity.jsonl and dev.jsonl)",
    )
    args = parser.parse_args(argv)
    if args.verb == "collect":
        collect(args.rows, args.out_dir, args.suite or SUITES)
        return 0
    aggregations.print_and_save(
        aggregations.evaluate(list(load_cases(args.rows, args.out_dir)), AGGREGATIONS, lookahead), args.json
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
