"""Offline: does a longer look-ahead keep more of the answers' text? (On the multi-hop cases; measured 2026-12-05.)

Per case, one draft pass of MAX_STEPS look-ahead steps with each step's scores kept (and the
question's rows, which the engine scores by default); the importance for L steps is the mean of the
first L steps and the question's rows, as the engine's own pass of L steps gives it, since the
look-ahead is greedy. Each importance then goes through the engine's selection
(plan_request_selection, named files and words as in a run) at keeps 0.2, 0.3 and auto; a case
counts as kept when half the tokens of one place of its answer are (layer_evidence's rule).
Usage: HF_HUB_OFFLINE=1 python research/scoring/lookahead_steps.py OUT.jsonl [KIND,KIND...]  (default: multihop)
       [--suite SUITE.jsonl]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path
from engine.core.settings import RunSettings


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


text_places, token_places = sibling("layer_evidence").text_places, sibling("layer_evidence").token_places

MAX_STEPS = 32
STEPS = (8, 16, 24, 32)
KEEPS = (0.2, 0.3, "auto")


class StepRecorder:
    """Wraps the scorer's step_importance and with_question: keeps each look-ahead step's importance
    row and the question's rows, and returns what they return."""

    def __init__(self):
        import engine.draft.scorer as scorer_module

        self.steps, self.question = [], None
        self._step, self._with_question = scorer_module.step_importance, scorer_module.with_question
        scorer_module.step_importance, scorer_module.with_question = self.record_step, self.record_question

    def record_step(self, rows, kernel):
        importance = self._step(rows, kernel)
        self.steps.append(importance.double().numpy().copy())
        return importance

    def record_question(self, lookahead, question_rows):
        self.question = question_rows.double().numpy().copy()
        return self._with_question(lookahead, question_rows)

    def reset(self):
        self.steps, self.question = [], None

    def importance(self, n_steps: int) -> np.ndarray:
        """The importance a pass of `n_steps` look-ahead steps gives (fewer when the draft stopped early)."""
        used = self.steps[:n_steps]
        rows = [*used, *(self.question if self.question is not None else [])]
        return np.mean(rows, axis=0)


class CaseSelection:
    """One case's prompt, with what every selection of it shares: the tokens' char offsets, the parts
    its question wants covered or kept first, and the token places of its answer."""

    def __init__(self, engine, prompt, doc, case):
        from engine.llama.prompt import token_char_offsets
        from engine.pipeline.selection_plan import wanted_parts

        self.prompt, self.case = prompt, case
        self.offsets = token_char_offsets(engine.runtime.model, prompt)
        # wanted_parts reads coverage and named files, not the keep: one for every keep.
        wanted = wanted_parts(RunSettings(), case.question, prompt.parts.document, tuple(doc.segments))
        self.parts, self.focus, self.definitions = (
            ([], (), ())
            if not wanted
            else wanted.in_tokens(self.offsets, len(prompt.parts.prefix), prompt.doc_token_span)
        )
        self.places = token_places(
            engine, prompt, text_places(prompt.parts.document, case.answers, 0, len(prompt.parts.document))
        )

    def kept_share(self, importance, keep) -> tuple[bool, float]:
        """Whether the selection at `keep` holds one place of the answer, and the share of tokens it keeps."""
        from engine.pipeline.selection_plan import plan_request_selection

        plan = plan_request_selection(
            importance,
            self.prompt,
            RunSettings(keep=keep),
            None,
            self.parts,
            self.offsets,
            self.focus,
            self.definitions,
        )
        mask = np.zeros(self.prompt.n_tokens, bool)
        mask[plan.kept_idx] = True
        return any(mask[a:b].mean() >= 0.5 for a, b in self.places), len(plan.kept_idx) / self.prompt.n_tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="OUT.jsonl: one row a case")
    parser.add_argument("kinds", nargs="?", default="multihop", help="case kinds, comma-separated")
    parser.add_argument("--suite", type=Path, default=resource_path("eval", "fidelity.jsonl"))
    args = parser.parse_args(argv)

    from engine.core.settings import ModelSettings
    from engine.core.steps import run_to_end
    from engine.draft.scorer import DraftPrefix, ScoringParams
    from engine.eval.suite import load_suite
    from engine.ingest import load_document
    from engine.pipeline import Engine

    kinds = set(args.kinds.split(","))
    cases = [c for c in load_suite(args.suite) if c.kind in kinds and c.answers]
    by_doc = defaultdict(list)
    for case in cases:
        by_doc[case.doc].append(case)
    recorder, base = StepRecorder(), RunSettings(lookahead=MAX_STEPS)
    engine = Engine.load(ModelSettings())
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            for doc_path, doc_cases in by_doc.items():
                doc, prefix = load_document(doc_path), None
                for case in doc_cases:
                    prompt = engine.prepare(doc.text, case.question, base)
                    prefix = prefix or DraftPrefix(
                        prompt.tokens[: prompt.tail_start].copy(), base.draft_window
                    )
                    recorder.reset()
                    t0 = time.perf_counter()
                    score = run_to_end(
                        engine.scorer.iter_score(
                            prompt.tokens.tolist(),
                            ScoringParams.from_settings(base, prompt.question_rows),
                            prefix=prefix,
                        )
                    )
                    row = dict(
                        id=case.id,
                        kind=case.kind,
                        tokens=prompt.n_tokens,
                        draft_s=round(time.perf_counter() - t0, 1),
                        lookahead=engine.detokenize(score.lookahead_tokens),
                    )
                    selection = CaseSelection(engine, prompt, doc, case)
                    for steps in STEPS:
                        for keep in KEEPS:
                            kept, share = selection.kept_share(recorder.importance(steps), keep)
                            row[f"{steps}/{keep}"], row[f"{steps}/{keep}_kept"] = int(kept), round(share, 3)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(
                        case.id, {k: v for k, v in row.items() if "/" in k and "_kept" not in k}, flush=True
                    )
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
