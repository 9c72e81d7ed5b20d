"""Draft-only probe for named files and definitions: per question of a code-base suite, does the
answer's text survive SpecPrefill's selection with the draft's scores alone (--named-files off) and
with what the question names kept first (auto)? One draft pass per question, the document's segments
cached between questions, so it costs the draft, not the target.

Usage: python research/named-code/named-code-probe.py OUT.jsonl SUITE.jsonl [SUITE.jsonl ...] [--keep 0.2]

A case's answer survives when some place in the folder that spells one of its expected answers has all
its tokens kept. The same scores serve both settings, so the two columns differ only by what is kept first.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.core.settings import RunSettings


def layer_evidence():
    """research/scoring/layer_evidence.py, as a module. research/ is no installed package (only the engine is), so
    the script is loaded from its file: no search path is changed."""
    key = "research.scoring.layer_evidence"
    if key not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "scoring" / "layer_evidence.py"
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def survives(
    engine, prompt, offsets, importance, settings: RunSettings, document, places
) -> tuple[bool, list[str]]:
    """Whether some answer place is wholly kept under these settings, and what was kept first (`offsets`:
    the prompt's token char offsets)."""
    from engine.pipeline.selection_plan import char_token_spans, plan_request_selection, wanted_parts

    doc_start = len(prompt.parts.prefix)
    wanted = wanted_parts(settings, prompt.parts.question, document.text, document.segments)
    covered, files, definitions = wanted.in_tokens(offsets, doc_start, prompt.doc_token_span)
    plan = plan_request_selection(
        importance, prompt, settings, engine.selection_budget(prompt, settings), covered, files, definitions
    )
    kept = np.zeros(prompt.n_tokens, dtype=bool)
    kept[plan.kept_idx] = True
    spans = char_token_spans(places, offsets, doc_start, prompt.doc_token_span)
    return any(b > a and kept[a:b].all() for a, b in spans), list(plan.focused_parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="OUT.jsonl: one row a question")
    parser.add_argument("suites", nargs="+", help="code-base suites (SUITE.jsonl)")
    parser.add_argument("--keep", type=float, default=0.2)
    args = parser.parse_args(argv)

    from engine.core.settings import ModelSettings
    from engine.core.steps import run_to_end
    from engine.draft.scorer import ScoringParams
    from engine.draft.segments import iter_score_segments
    from engine.eval.suite import load_suite
    from engine.ingest import load_document
    from engine.llama.prompt import token_char_offsets
    from engine.pipeline import Engine
    from engine.pipeline.draft_cache import DocumentSegments, DraftCaches
    from engine.pipeline.session import PrefixKey

    text_places = layer_evidence().text_places
    engine = Engine.load(ModelSettings())
    base = RunSettings(keep=args.keep)
    caches, documents, right = DraftCaches(3 << 30), {}, {"off": 0, "auto": 0}
    with open(args.out, "w") as out:
        for suite in args.suites:
            for case in load_suite(suite):
                if case.doc not in documents:
                    documents[case.doc] = load_document(case.doc)
                document = documents[case.doc]
                prompt = engine.prepare(document.text, case.question, base)
                key = PrefixKey(str(case.doc), ("probe", 0), ("probe", 0), "", 0, "")
                t0 = time.perf_counter()
                score = run_to_end(
                    iter_score_segments(
                        engine.scorer,
                        prompt.tokens.tolist(),
                        prompt.doc_token_span,
                        engine.draft_pass_tokens(base),
                        ScoringParams.from_settings(base),
                        cache=DocumentSegments(caches, key, base.draft_window),
                    )
                )
                draft_s = time.perf_counter() - t0
                offsets = token_char_offsets(engine.runtime.model, prompt)  # both settings share them
                places = text_places(document.text, case.answers or (), 0, len(document.text))
                row = {"suite": Path(suite).name, "id": case.id, "draft_s": round(draft_s, 1)}
                for named in ("off", "auto"):
                    settings = replace(base, named_files=named)
                    ok, focused = survives(
                        engine, prompt, offsets, score.importance, settings, document, places
                    )
                    right[named] += ok
                    row[named] = ok
                    row[f"{named}_focused"] = focused
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(
                    f"{row['suite']:32s} {case.id:40s} off {'kept' if row['off'] else '----'}  "
                    f"auto {'kept' if row['auto'] else '----'}  draft {draft_s:.0f} s  {row['auto_focused']}",
                    flush=True,
                )
    print(f"answer kept: scores alone {right['off']}, named first {right['auto']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
