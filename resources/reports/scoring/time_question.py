"""Draft cost of scoring with the question's rows: the same prompts scored with and without, alternating.
Usage: python time_question.py CASE_ID[,CASE_ID] (ids of resources/eval/fidelity.jsonl); one JSON line a pass."""
import json, sys, time
from dataclasses import replace
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from engine.core.settings import ModelSettings, RunSettings
from engine.core.steps import run_to_end
from engine.draft.scorer import ScoringParams
from engine.eval.suite import load_suite
from engine.ingest import load_document
from engine.pipeline import Engine

ids = sys.argv[1].split(",")
cases = {c.id: c for c in load_suite(ROOT / "resources/eval/fidelity.jsonl")}
engine = Engine.load(ModelSettings())
settings = RunSettings()
for cid in ids:
    case = cases[cid]
    prompt = engine.prepare(load_document(case.doc).text, case.question, settings)
    tokens = prompt.tokens.tolist()
    for rep in range(2):
        for on in ((False, True) if rep == 0 else (True, False)):
            params = ScoringParams.from_settings(replace(settings, score_question=on), prompt.question_rows)
            t0 = time.perf_counter()
            run_to_end(engine.scorer.iter_score(tokens, params))
            row = {"id": cid, "tokens": len(tokens), "question_rows": prompt.question_rows, "on": on,
                   "s": round(time.perf_counter() - t0, 2)}
            print(json.dumps(row), flush=True)
engine.close()
