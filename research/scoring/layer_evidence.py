"""Held-out check of the first-scored-layer lead: does scoring only the draft's later layers keep more
of the answer, on cases the lead was not chosen on?

The lead (README, "Which attention to score, offline") was picked on the fidelity and dev suites. This
asks cases neither holds: the long code-base suite (54K tokens: the draft reads it in segments) and the
48K needle haystack with its five facts. Each case is scored by the engine in a session, once per first
layer: a SpecPrefill run up to its selection, then cancelled. The engine reports a selection before the
target's prefill, so a case pays the draft only (before 2026-12-02, when the selection came with the
answer, the target's prefill was about 260 s of the 290-310 s a case took); the session keeps the draft's
segments, so after the first pass each draft score costs the question only. The chunk scores are then
cut at each keep (select_chunks, as the engine does, up to what fits the window) and the answer checked:
a place counts as kept when at least half of its tokens are.

- Code cases: the places where an answer's text occurs in the file that holds the answer (the suite's
  header table names it), since the text also occurs elsewhere ("50" in LICENSE-APACHE).
- Needles: the fact's sentence.

Each layer can also be scored with the question's own rows (`--question off,on`: the
`--score-question` scoring, on by default since 2026-12-04), checked on the same held-out cases.

Usage: python research/scoring/layer_evidence.py OUT.json [--layers 0,12] [--keeps 0.05,0.1,0.2]
       [--only code|needles] [--question off,on] [--code-suite SUITE.jsonl] [--needle-tokens 49152]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path
from engine.core.settings import RunSettings
from engine.draft.selection import kept_token_indices, select_chunks
from engine.eval.suite import load_suite
from engine.ingest import load_document

CODE_SUITE = resource_path("eval", "codebase-long.jsonl")
NEEDLE_DOCS = [
    resource_path("samples", "docs", name)
    for name in ("R-intro.pdf", "mpfi.pdf", "xfig-howto.pdf", "mpich-user-guide.pdf")
]
NEEDLE_TOKENS = 49152
# Scores alone: named files would put the answer's file first whatever the layers score.
BASE = RunSettings(keep=0.2, coverage="off", named_files="off", background_prefill=False, max_new_tokens=256)


def answer_files(suite: Path) -> dict[str, str]:
    """Case id -> the file holding its answer, from the suite's header table."""
    rows = (re.match(r"#\s+(\S+)\s+(src/\S+\.py)\s+\[", line) for line in suite.read_text().splitlines())
    return {m.group(1): m.group(2) for m in rows if m}


def selection_of(engine, session, question: str, settings: RunSettings):
    """The SpecPrefill run's selection, the run cancelled once it is reported (before the target's
    prefill); and the seconds it took."""
    from engine.core.cancel import CancelToken
    from engine.core.errors import Cancelled
    from engine.core.events import SelectionMade

    cancel, selection, t0 = CancelToken(), None, time.perf_counter()
    try:
        for event in engine.ask(session, question, "spec", settings, cancel):
            if isinstance(event, SelectionMade):
                selection = event.selection
                cancel.cancel()
    except Cancelled:
        pass
    if selection is None:
        raise RuntimeError(f"no selection for {question!r}: the run was bypassed?")
    return selection, time.perf_counter() - t0


def token_places(engine, prompt, char_places: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Prompt token spans of character spans in the document's text (those that hold a token)."""
    from engine.llama.prompt import token_char_offsets
    from engine.pipeline.selection_plan import char_token_spans

    offsets = token_char_offsets(engine.runtime.model, prompt)
    spans = char_token_spans(char_places, offsets, prompt.parts.doc_char_span[0], prompt.doc_token_span)
    return [(a, b) for a, b in spans if b > a]


def text_places(text: str, phrases, start: int, end: int) -> list[tuple[int, int]]:
    """Where each phrase occurs in text[start:end], case-insensitive."""
    low = text.lower()
    found = []
    for phrase in phrases:
        at = low.find(phrase.lower(), start)
        while 0 <= at and at + len(phrase) <= end:
            found.append((at, at + len(phrase)))
            at = low.find(phrase.lower(), at + 1)
    return found


def kept_at(selection, keep: float, budget: int | None, places: list[tuple[int, int]], n_tokens: int) -> bool:
    cs = selection.chunk_size
    kept = select_chunks(
        np.asarray(selection.chunk_scores),
        keep,
        selection.protected_chunks,
        None if budget is None else budget // cs,
    )
    mask = np.zeros(n_tokens, bool)
    mask[kept_token_indices(kept, cs, n_tokens)] = True
    return any(mask[a:b].mean() >= 0.5 for a, b in places)


def measure(engine, session, text, cases, variants, keeps, out_rows):
    """cases: (suite, id, question, char places); variants: (first layer, question scored). One row per
    case, variant and keep."""
    for suite, case_id, question, char_places in cases:
        prompt = engine.prepare(text, question, BASE)
        places = token_places(engine, prompt, char_places)
        budget = engine.selection_budget(prompt, BASE)
        for layer, scored in variants:
            settings = replace(BASE, first_scored_layer=layer, score_question=scored)
            selection, seconds = selection_of(engine, session, question, settings)
            for keep in keeps:
                row = dict(
                    suite=suite,
                    id=case_id,
                    layer=layer,
                    question=scored,
                    keep=keep,
                    places=len(places),
                    kept=kept_at(selection, keep, budget, places, prompt.n_tokens),
                    seconds=round(seconds, 1),
                )
                out_rows.append(row)
                print(json.dumps(row), flush=True)


def code_cases(suite: Path = CODE_SUITE):
    files = answer_files(suite)
    cases = load_suite(suite)
    doc = load_document(cases[0].doc)
    spans = {seg.label: (seg.start, seg.end) for seg in doc.segments}
    rows = []
    for case in cases:
        start, end = spans[files[case.id]]
        rows.append(("code", case.id, case.question, text_places(doc.text, case.answers, start, end)))
    return doc, rows


def needle_cases(engine, n_tokens: int = NEEDLE_TOKENS, docs=NEEDLE_DOCS):
    from engine.eval.needles import DEPTHS, haystack, insert_needles, needle_for

    placed = [(depth / 100, needle_for(depth)) for depth in DEPTHS]
    texts = [load_document(path).text for path in docs]
    text = insert_needles(haystack(engine, texts, n_tokens), placed)
    rows = []
    for depth, needle in placed:
        at = text.index(needle.fact)
        rows.append(
            ("needles", f"depth-{round(depth * 100)}", needle.question, [(at, at + len(needle.fact))])
        )
    return text, rows


def summary(rows, variants, keeps) -> dict:
    out = {}
    for suite in sorted({r["suite"] for r in rows}):
        for layer, scored in variants:
            for keep in keeps:
                hits = [
                    r["kept"]
                    for r in rows
                    if (r["suite"], r["layer"], r.get("question", False), r["keep"])
                    == (suite, layer, scored, keep)
                ]
                label = f"{suite} layer {layer}+{' with the question' if scored else ''} keep {keep}"
                out[label] = f"{sum(hits)} of {len(hits)}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", default="0,12")
    parser.add_argument("--keeps", default="0.05,0.1,0.2")
    parser.add_argument("--only", choices=("code", "needles"))
    parser.add_argument("--question", default="off", help="off, on or off,on: score with the question's rows")
    parser.add_argument(
        "--code-suite",
        type=Path,
        default=CODE_SUITE,
        help="a code-base suite whose header table names each answer's file",
    )
    parser.add_argument(
        "--needle-tokens", type=int, default=NEEDLE_TOKENS, help="the needle haystack's length"
    )
    parser.add_argument(
        "--needle-doc",
        type=Path,
        action="append",
        help="a haystack document (repeatable; default: four of resources/samples/docs)",
    )
    args = parser.parse_args(argv)

    from engine.core.settings import ModelSettings
    from engine.pipeline import DocumentSession, Engine

    layers = [int(v) for v in args.layers.split(",")]
    keeps = [float(v) for v in args.keeps.split(",")]
    variants = [(layer, flag == "on") for layer in layers for flag in args.question.split(",")]
    engine = Engine.load(ModelSettings(draft_cache_gb=3.0, state_cache_gb=0.0))
    rows: list[dict] = []
    try:
        if args.only in (None, "code"):
            doc, cases = code_cases(args.code_suite)
            measure(engine, DocumentSession(doc), doc.text, cases, variants, keeps, rows)
        if args.only in (None, "needles"):
            text, cases = needle_cases(engine, args.needle_tokens, args.needle_doc or NEEDLE_DOCS)
            measure(engine, DocumentSession(text), text, cases, variants, keeps, rows)
    finally:
        engine.close()
    result = {
        "layers": layers,
        "question": args.question,
        "keeps": keeps,
        "summary": summary(rows, variants, keeps),
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
