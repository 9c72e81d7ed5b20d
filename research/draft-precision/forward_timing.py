"""Time the default draft's plain forward against its SpecPrefill scoring pass, per precision.

    python research/draft-precision/forward_timing.py --tokens 8192 --precisions int8,fp32,bf16,torchao-int8

Each line: precision, prompt tokens, a plain `model.model(ids)` forward in the scorer's 1,024-token
chunks (KV cache kept), the scorer's whole pass (prefill + 8 look-ahead steps + question rows off), and
both as seconds per 1K tokens. The prompt is the mpfi guide's text, cut to the length asked for.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from engine.core.settings import DRAFT_PREFILL_CHUNK
from engine.draft.loader import ensure_dequantized, quantize_int8
from engine.draft.scorer import ATTN_IMPL, DraftScorer, ScoringParams
from engine.ingest import load_document
from engine.models import defaults


def load(precision: str):
    source = ensure_dequantized(defaults.DRAFT.path)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(
        str(source), dtype=dtype, attn_implementation=ATTN_IMPL
    ).eval()
    if precision == "int8":
        model = quantize_int8(model)
    elif precision == "torchao-int8":
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        quantize_(model, Int8DynamicActivationInt8WeightConfig())
    return model


def plain_forward(model, ids: list[int]) -> float:
    cache = DynamicCache(config=model.config)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(ids), DRAFT_PREFILL_CHUNK):
            chunk = ids[start : start + DRAFT_PREFILL_CHUNK]
            model.model(
                input_ids=torch.tensor([chunk]),
                position_ids=torch.arange(start, start + len(chunk)).unsqueeze(0),
                cache=cache,
                use_cache=True,
            )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--precisions", default="int8,fp32,bf16")
    parser.add_argument("--doc", default="resources/samples/docs/mpfi.pdf")
    args = parser.parse_args()
    from engine.llama.native import LlamaModel

    text = load_document(args.doc).text
    vocab = LlamaModel(defaults.DRAFT.path, vocab_only=True)
    ids = vocab.tokenize(text, parse_special=False)[: args.tokens]
    for precision in args.precisions.split(","):
        model = load(precision)
        plain_forward(model, ids[:64])  # first-touch costs
        plain = plain_forward(model, ids)
        scorer = DraftScorer(model, set())
        t0 = time.perf_counter()
        scorer.score(ids, ScoringParams(lookahead=8, kernel=13))
        scored = time.perf_counter() - t0
        k = len(ids) / 1000
        print(
            json.dumps(
                {
                    "precision": precision,
                    "tokens": len(ids),
                    "plain_s": round(plain, 2),
                    "scorer_s": round(scored, 2),
                    "plain_s_per_1k": round(plain / k, 2),
                    "scorer_s_per_1k": round(scored / k, 2),
                    "threads": torch.get_num_threads(),
                }
            ),
            flush=True,
        )
        del model, scorer


if __name__ == "__main__":
    main()
