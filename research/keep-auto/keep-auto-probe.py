"""Draft-only probe for keep=auto: per case, the draft's score spread, auto's keep, and whether the
answer's text (or each summary key point) survives the selection at fixed keeps and at auto.

With --scores, each row also holds the chunk scores, the always-kept chunks and, per answer (or key
point), the chunks of each place its text occurs: enough to try another keep rule offline.
With --heads DIR, each case's look-ahead attention is also saved, per step, layer and head, as chunk
means and chunk maxima of the smoothed rows (DIR/ID.npz): enough to try another way of reducing
them to chunk scores offline (research/scoring/aggregations.py).
Usage: python research/keep-auto/keep-auto-probe.py OUT.jsonl [--scores] [--heads DIR] [--suite SUITE.jsonl ...]"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path

KEEPS = [0.1, 0.2, 0.3, 0.4]
SUITES = [resource_path("eval", "fidelity.jsonl"), resource_path("eval", "dev.jsonl")]


class HeadRecorder:
    """Wraps the scorer's step_importance: returns what it returns, and keeps each step's smoothed
    rows (layers*heads, n_prompt) reduced to chunk means and chunk maxima."""

    def __init__(self, chunk_size):
        import engine.draft.scorer as scorer_mod
        from engine.draft.selection import chunk_scores, smooth_rows

        self.chunk_size, self.smooth, self.chunk_scores, self.steps = (
            chunk_size,
            smooth_rows,
            chunk_scores,
            [],
        )
        scorer_mod.step_importance = self.record

    def record(self, rows, kernel):
        pooled = self.smooth(rows, kernel)
        rows_np = pooled.float().numpy()
        mean = self.chunk_scores(rows_np, self.chunk_size)
        peak = self.chunk_scores(rows_np, self.chunk_size, np.nanmax)
        self.steps.append((mean.astype(np.float16), peak.astype(np.float16)))
        return pooled.amax(dim=0)

    def save(self, path, **meta):
        np.savez_compressed(
            path,
            chunk_mean=np.stack([m for m, _ in self.steps]),
            chunk_max=np.stack([p for _, p in self.steps]),
            **meta,
        )
        self.steps = []


def spans(text, phrase):
    low, p = text.lower(), phrase.lower()
    i = low.find(p)
    while i >= 0:
        yield i, i + len(p)
        i = low.find(p, i + 1)


def token_span(offsets, doc_start, a, b):
    t0 = int(np.searchsorted(offsets, doc_start + a, side="right")) - 1
    t1 = int(np.searchsorted(offsets, doc_start + b, side="left"))
    return t0, t1


def evidence_chunks(phrases, doc_text, offsets, doc_start, chunk_size):
    """For each place one of the phrases occurs: the chunks its tokens lie in."""
    places = []
    for ph in phrases:
        for a, b in spans(doc_text, ph):
            t0, t1 = token_span(offsets, doc_start, a, b)
            if t1 > t0:
                places.append(list(range(t0 // chunk_size, (t1 - 1) // chunk_size + 1)))
    return places


def survives(phrases, doc_text, offsets, doc_start, kept_mask):
    for ph in phrases:
        for a, b in spans(doc_text, ph):
            t0, t1 = token_span(offsets, doc_start, a, b)
            if t1 > t0 and kept_mask[t0:t1].mean() >= 0.5:
                return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="OUT.jsonl: one row a case")
    parser.add_argument("--scores", action="store_true", help="also the chunk scores and evidence chunks")
    parser.add_argument("--heads", type=Path, metavar="DIR", help="also the look-ahead attention, DIR/ID.npz")
    parser.add_argument(
        "--suite",
        type=Path,
        action="append",
        help="a suite to probe (repeatable; default: resources/eval/fidelity.jsonl and dev.jsonl)",
    )
    args = parser.parse_args(argv)

    from engine.core.settings import ModelSettings, RunSettings
    from engine.core.steps import run_to_end
    from engine.draft.keep_policy import choose_keep
    from engine.draft.scorer import DraftPrefix, ScoringParams
    from engine.draft.selection import chunk_scores, protected_chunks
    from engine.eval.suite import load_suite
    from engine.ingest import load_document
    from engine.llama.prompt import token_char_offsets
    from engine.pipeline import Engine
    from engine.pipeline.selection_plan import plan_request_selection, segment_token_parts, wants_coverage

    with_scores, heads_dir = args.scores or args.heads is not None, args.heads
    by_doc = defaultdict(list)
    for suite in args.suite or SUITES:
        for c in load_suite(suite):
            by_doc[c.doc].append(c)
    engine = Engine.load(ModelSettings())
    base = RunSettings()
    recorder = None
    if heads_dir is not None:
        heads_dir.mkdir(parents=True, exist_ok=True)
        recorder = HeadRecorder(base.chunk_size)
    with open(args.out, "w") as out:
        for doc_path, doc_cases in by_doc.items():
            doc = load_document(doc_path)
            prefix = None
            for case in doc_cases:
                prompt = engine.prepare(doc.text, case.question, base)
                if prompt.n_tokens > 30000:
                    print("skip", case.id, prompt.n_tokens, flush=True)
                    break
                if prefix is None:
                    prefix = DraftPrefix(prompt.tokens[: prompt.tail_start].copy(), base.draft_window)
                t = time.perf_counter()
                score = run_to_end(
                    engine.scorer.iter_score(
                        prompt.tokens.tolist(), ScoringParams.from_settings(base), prefix=prefix
                    )
                )
                draft_s = time.perf_counter() - t
                offsets = np.array(token_char_offsets(engine.runtime.model, prompt))
                doc_start = len(prompt.parts.prefix)
                parts = segment_token_parts(doc.segments, offsets, doc_start, prompt.doc_token_span)
                scores = chunk_scores(score.importance, base.chunk_size)
                prot = protected_chunks(prompt.n_tokens, base.chunk_size, prompt.tail_start)
                # The keep=auto policy this probe measured (the engine's until 2026-12-03): broad questions at the ceiling.
                # It had no rule for questions that join two facts: those took the spread's keep too,
                # which the question-free call gives.
                by_spread = choose_keep(scores, prot, "", 0.1, 0.4, broad_keep=0.4, joined_keep=0.4).keep
                choice = choose_keep(
                    scores, prot, case.question, 0.1, 0.4, broad_keep=0.4, joined_keep=by_spread
                )
                row = dict(
                    id=case.id,
                    kind=case.kind,
                    doc=Path(case.doc).name,
                    tokens=prompt.n_tokens,
                    spread=round(choice.spread, 4),
                    auto_keep=choice.keep,
                    broad=choice.broad,
                    draft_s=round(draft_s, 1),
                    parts=len(parts),
                )
                points = case.key_points or ([case.answers] if case.answers else [])
                for label, keep, cov in [
                    *((str(k), k, "off") for k in KEEPS),
                    ("auto", "auto", "off"),
                    *((f"{k}+cov", k, "on") for k in KEEPS),
                    ("auto+cov", "auto", "auto"),
                ]:
                    run = RunSettings(keep=keep, coverage=cov)
                    plan = plan_request_selection(
                        score.importance,
                        prompt,
                        run,
                        None,
                        parts if wants_coverage(run, case.question) else [],
                        offsets.tolist(),
                    )
                    mask = np.zeros(prompt.n_tokens, bool)
                    mask[plan.kept_idx] = True
                    hit = [survives(p, doc.text, offsets, doc_start, mask) for p in points]
                    row[label] = round(sum(hit) / len(hit), 3) if hit else None
                    row[label + "_kept"] = round(len(plan.kept_idx) / prompt.n_tokens, 3)
                if with_scores:
                    row.update(
                        chunk_size=base.chunk_size,
                        protected=[int(c) for c in prot],
                        chunk_scores=[float(f"{v:.5g}") for v in scores],
                        evidence=[
                            evidence_chunks(p, doc.text, offsets, doc_start, base.chunk_size) for p in points
                        ],
                    )
                if recorder is not None:
                    cfg = engine.scorer.model.config
                    recorder.save(
                        heads_dir / f"{case.id}.npz",
                        layers=cfg.num_hidden_layers,
                        heads=cfg.num_attention_heads,
                        importance=score.importance.astype(np.float32),
                    )
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(
                    row["id"],
                    row["kind"],
                    row["spread"],
                    row["auto_keep"],
                    row["0.1"],
                    row["0.2"],
                    row["auto"],
                    flush=True,
                )
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
