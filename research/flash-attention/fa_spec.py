"""Flash attention on/off, alternating: the target's prefill of 20% of a prompt's chunks at their
original (gapped) positions, as a SpecPrefill run does (8K tokens of mpfi.pdf by default).

Usage: python research/flash-attention/fa_spec.py [--tokens 8192] [--rounds 3] [--doc PDF] [--model GGUF]
One line a prefill; the log of the default run is fa_spec.log beside this file."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path

CHUNK = 32
DEFAULT_MODEL = Path.home() / ".cache/specprefill/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192, help="the prompt's length (its first tokens)")
    parser.add_argument("--keep", type=float, default=0.2, help="share of the 32-token chunks prefilled")
    parser.add_argument("--rounds", type=int, default=3, help="on/off pairs, alternating which runs first")
    parser.add_argument("--doc", type=Path, default=resource_path("samples", "docs", "mpfi.pdf"))
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="the target's GGUF")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    from engine.ingest import load_document
    from engine.llama.native import LlamaContext, LlamaModel, ensure_backend

    ensure_backend()
    m = LlamaModel(args.model)
    toks = np.array(
        m.tokenize(load_document(args.doc).text, parse_special=False)[: args.tokens], dtype=np.int32
    )
    n_chunks = len(toks) // CHUNK
    rng = np.random.default_rng(0)
    chunks = np.sort(rng.choice(n_chunks, size=max(1, math.ceil(args.keep * n_chunks)), replace=False))
    idx = np.concatenate([np.arange(c * CHUNK, c * CHUNK + CHUNK) for c in chunks])
    kept, pos = toks[idx], idx.astype(np.int32)
    ctxs = {
        fa: LlamaContext(m, n_ctx=32768, n_batch=512, n_threads=args.threads, flash_attn=fa)
        for fa in ("on", "off")
    }
    for rnd in range(args.rounds):
        for fa in ("on", "off") if rnd % 2 == 0 else ("off", "on"):
            ctx = ctxs[fa]
            ctx.clear()
            t = time.perf_counter()
            for s in range(0, len(kept), 512):
                e = min(len(kept), s + 512)
                assert ctx.decode(kept[s:e], pos[s:e], e == len(kept)) == 0
            print(
                f"round {rnd} fa={fa} kept-prefill {len(kept)} tokens: {time.perf_counter() - t:.2f}s",
                flush=True,
            )
    for ctx in ctxs.values():
        ctx.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
