"""On paper: TTFT at 16K tokens for a 70B Q4 target over three 32 GB machines on 1 Gb/s, with and
without SpecPrefill, from what was measured here on the 1.5B target.

python research/rpc/cluster_estimate.py BENCH_LOCAL.json BENCH_16K.json TRANSFER_PROBE.json

- Compute: a full prefill's time on this CPU fitted as b·n + c·n² (8K from BENCH_LOCAL, 16K from
  BENCH_16K's cold full prefill), then scaled to the 70B: the linear term by non-embedding
  parameters, the quadratic (attention) term by layers × query heads × head size. The layers run
  one machine after another, so three machines as fast as this one compute as one would.
- Network: the bytes per prefilled token measured on loopback (TRANSFER_PROBE, two lengths) fitted
  as p + q·n (q: the attention mask each worker gets, which grows with the context), the p part
  scaled by the hidden size, then sent at 1 Gb/s.
- SpecPrefill: the draft stays on this machine (its 8K time from BENCH_LOCAL, doubled: the
  windowed draft is linear); the target prefills the kept 20% over the network.
"""

from __future__ import annotations

import argparse
import json

LINK_BYTES_S = 1e9 / 8  # 1 Gb/s
KEEP = 0.2
N = 16384
# (non-embedding parameters, layers, query heads, head size, hidden size)
QWEN_1_5B = (1.31e9, 28, 12, 128, 1536)
LLAMA_70B = (68.5e9, 80, 64, 128, 8192)
WEIGHTS_70B_Q4_GB = 42.5
KV_70B_GB_PER_TOKEN = 80 * 8 * 128 * 2 * 2 / 1e9  # layers × KV heads × head size × (K, V) × f16


def fit_two(x1: float, y1: float, x2: float, y2: float) -> tuple[float, float]:
    """(b, c) with y = b·x + c·x² through both points."""
    c = (y2 / x2 - y1 / x1) / (x2 - x1)
    return y1 / x1 - c * x1, c


def main(bench_local: str, bench_16k: str, probe: str) -> None:
    rows = {r["tokens"]: r for r in json.load(open(bench_local))["results"]}
    full_16k = json.load(open(bench_16k))["sessions"][0]["cold_full_ttft_s"]
    b, c = fit_two(8192, rows[8192]["baseline_prefill_s"], 16384, full_16k)
    draft_16k = 2 * rows[8192]["draft_s"]
    prefills = json.load(open(probe))["prefill"]
    (n1, y1), (n2, y2) = [(p["tokens"], p["bytes_per_token"]) for p in prefills[:2]]
    q = (y2 - y1) / (n2 - n1)
    p0 = y1 - q * n1

    linear_ratio = LLAMA_70B[0] / QWEN_1_5B[0]
    attention_ratio = (LLAMA_70B[1] * LLAMA_70B[2] * LLAMA_70B[3]) / (
        QWEN_1_5B[1] * QWEN_1_5B[2] * QWEN_1_5B[3]
    )
    hidden_ratio = LLAMA_70B[4] / QWEN_1_5B[4]

    def compute_s(tokens: int) -> float:
        return linear_ratio * b * tokens + attention_ratio * c * tokens**2

    def network_s(tokens: int) -> float:
        return tokens * (p0 * hidden_ratio + q * tokens) / LINK_BYTES_S

    kept = int(KEEP * N)
    full = compute_s(N) + network_s(N)
    spec = draft_16k + compute_s(kept) + network_s(kept)
    figures = {
        "fit_1_5b": {
            "b_s_per_token": b,
            "c_s_per_token2": c,
            "check_4k_s": b * 4096 + c * 4096**2,
            "measured_4k_s": rows[4096]["baseline_prefill_s"],
        },
        "bytes_per_token_1_5b": {"p": p0, "q_per_context_token": q},
        "ratios": {"linear": linear_ratio, "attention": attention_ratio, "hidden": hidden_ratio},
        "70b_full_16k": {"compute_s": compute_s(N), "network_s": network_s(N), "ttft_s": full},
        "70b_spec_16k": {
            "draft_s": draft_16k,
            "compute_s": compute_s(kept),
            "network_s": network_s(kept),
            "ttft_s": spec,
        },
        "speedup": full / spec,
        "memory": {
            "weights_gb": WEIGHTS_70B_Q4_GB,
            "kv_16k_gb": KV_70B_GB_PER_TOKEN * N,
            "per_machine_gb": (WEIGHTS_70B_Q4_GB + KV_70B_GB_PER_TOKEN * N) / 3,
        },
    }
    print(json.dumps(figures, indent=2))


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "bench_local", help="`specprefill bench --json` with 4K and 8K rows (bench-local.json)"
    )
    parser.add_argument(
        "bench_16k",
        help="`specprefill bench --sessions --json` at 16K (research/sessions/bench-sessions-mpfi-16k-flash-off.json)",
    )
    parser.add_argument("probe", help="transfer_probe.py's output (transfer-probe.json)")
    args = parser.parse_args(argv)
    main(args.bench_local, args.bench_16k, args.probe)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
