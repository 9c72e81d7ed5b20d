"""Flash attention on/off, alternating: the target's prefill of 20% of an 8K prompt's chunks at their
original (gapped) positions, as a SpecPrefill run does; and a 33-token tail over a 2K cache."""
import sys, time
import numpy as np
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from engine.llama.native import LlamaModel, LlamaContext, ensure_backend
from engine.ingest import load_document

ensure_backend()
m = LlamaModel(Path.home() / ".cache/specprefill/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
doc = load_document(Path(ROOT / "resources/samples/docs/mpfi.pdf"))
toks = np.array(m.tokenize(doc.text, parse_special=False)[:8192], dtype=np.int32)
rng = np.random.default_rng(0)
chunks = np.sort(rng.choice(256, size=52, replace=False))
idx = np.concatenate([np.arange(c * 32, c * 32 + 32) for c in chunks])
kept, pos = toks[idx], idx.astype(np.int32)
ctxs = {fa: LlamaContext(m, n_ctx=32768, n_batch=512, n_threads=2, flash_attn=fa) for fa in ("on", "off")}
for rnd in range(3):
    for fa in (("on", "off") if rnd % 2 == 0 else ("off", "on")):
        ctx = ctxs[fa]
        ctx.clear()
        t = time.perf_counter()
        for s in range(0, len(kept), 512):
            e = min(len(kept), s + 512)
            assert ctx.decode(kept[s:e], pos[s:e], e == len(kept)) == 0
        print(f"round {rnd} fa={fa} kept-prefill {len(kept)} tokens: {time.perf_counter() - t:.2f}s", flush=True)
