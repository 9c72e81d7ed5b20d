"""Flash-attention on/off: cold prefill of N tokens, then a 33-token tail over the cache, and decode steps."""
import sys, time, logging
import numpy as np
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from engine.llama.native import LlamaModel, LlamaContext, ensure_backend
from engine.ingest import load_document

N = int(sys.argv[1]); modes = sys.argv[2].split(",")  # "on,off": the context's flash attention, in order
ensure_backend()
m = LlamaModel(Path.home() / ".cache/specprefill/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
doc = load_document(Path(ROOT / "resources/samples/docs/R-intro.pdf"))
toks = np.array(m.tokenize(doc.text, parse_special=False)[:N + 33], dtype=np.int32)
prefix, tail = toks[:N], toks[N:N + 33]
for fa in modes:
    ctx = LlamaContext(m, n_ctx=32768, n_batch=512, n_threads=2, flash_attn=fa)
    t = time.perf_counter()
    for s in range(0, N, 512):
        e = min(N, s + 512)
        assert ctx.decode(prefix[s:e], np.arange(s, e, dtype=np.int32), e == N) == 0
    cold = time.perf_counter() - t
    tails = []
    for _ in range(3):
        ctx.remove_after(N)
        t = time.perf_counter()
        assert ctx.decode(tail, np.arange(N, N + 33, dtype=np.int32), True) == 0
        tails.append(time.perf_counter() - t)
    lg = ctx.last_logits(); first = int(np.argmax(lg))
    steps = []
    for i in range(5):
        t = time.perf_counter()
        assert ctx.decode(np.array([first], np.int32), np.array([N + 33 + i], np.int32), True) == 0
        steps.append(time.perf_counter() - t)
    print(f"fa={fa} N={N} cold={cold:.1f}s tail={['%.3f' % x for x in tails]} decode={['%.3f' % x for x in steps]} first={first}", flush=True)
    ctx.close()
