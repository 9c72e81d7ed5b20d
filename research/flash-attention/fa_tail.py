"""Flash-attention on/off: cold prefill of N tokens, then a 33-token tail over the cache, and decode steps.

Usage: python research/flash-attention/fa_tail.py 4096 on,off [--doc PDF] [--model GGUF]
One line per setting, in the order given; the log of `4096 on,off` is fa_tail-4k.log beside this file."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path

TAIL = 33
DEFAULT_MODEL = Path.home() / ".cache/specprefill/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokens", type=int, help="N: the cold prefill's length")
    parser.add_argument("modes", help='the context\'s flash attention, in order: "on,off"')
    parser.add_argument("--doc", type=Path, default=resource_path("samples", "docs", "R-intro.pdf"))
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="the target's GGUF")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    from engine.ingest import load_document
    from engine.llama.native import LlamaContext, LlamaModel, ensure_backend

    n = args.tokens
    ensure_backend()
    m = LlamaModel(args.model)
    toks = np.array(m.tokenize(load_document(args.doc).text, parse_special=False)[: n + TAIL], dtype=np.int32)
    prefix, tail = toks[:n], toks[n : n + TAIL]
    for fa in args.modes.split(","):
        ctx = LlamaContext(m, n_ctx=32768, n_batch=512, n_threads=args.threads, flash_attn=fa)
        t = time.perf_counter()
        for s in range(0, n, 512):
            e = min(n, s + 512)
            assert ctx.decode(prefix[s:e], np.arange(s, e, dtype=np.int32), e == n) == 0
        cold = time.perf_counter() - t
        tails = []
        for _ in range(3):
            ctx.remove_after(n)
            t = time.perf_counter()
            assert ctx.decode(tail, np.arange(n, n + len(tail), dtype=np.int32), True) == 0
            tails.append(time.perf_counter() - t)
        first = int(np.argmax(ctx.last_logits()))
        steps = []
        for i in range(5):
            t = time.perf_counter()
            assert ctx.decode(np.array([first], np.int32), np.array([n + len(tail) + i], np.int32), True) == 0
            steps.append(time.perf_counter() - t)
        print(
            f"fa={fa} N={n} cold={cold:.1f}s tail={[f'{x:.3f}' for x in tails]} "
            f"decode={[f'{x:.3f}' for x in steps]} first={first}",
            flush=True,
        )
        ctx.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
