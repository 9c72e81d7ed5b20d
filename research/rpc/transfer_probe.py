"""Bytes the target sends over RPC on loopback: at load (its workers' weights), per prefilled
token and per decoded token, with the time each took; over the workers given on the command line.

python research/rpc/transfer_probe.py 127.0.0.1:50052,127.0.0.1:50053 [TOKENS[,TOKENS...]]
Loopback counts each byte once as sent: the figures are the `lo` interface's tx bytes.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from engine.core.resources import resource_path


def lo_tx_bytes() -> int:
    for line in open("/proc/net/dev"):
        name, _, data = line.partition(":")
        if name.strip() == "lo":
            return int(data.split()[8])
    raise RuntimeError("no loopback interface")


def measured(fn):
    before, started = lo_tx_bytes(), time.perf_counter()
    value = fn()
    return value, lo_tx_bytes() - before, time.perf_counter() - started


def prefill_figures(runtime, tokens: np.ndarray) -> dict:
    positions = np.arange(len(tokens), dtype=np.int32)
    logits, sent, seconds = measured(lambda: runtime.prefill(tokens, positions))
    steps = 8
    _, decode_sent, decode_s = measured(lambda: list(runtime.generate(logits, len(tokens), steps + 1)))
    return {
        "tokens": len(tokens),
        "bytes": sent,
        "bytes_per_token": sent / len(tokens),
        "s": round(seconds, 2),
        "decode_bytes_per_token": decode_sent / steps,
        "decode_s_per_token": round(decode_s / steps, 3),
    }


def open_target(workers: str, n_ctx: int):
    """The default target alone (no draft: only the target talks to the workers), split by free memory."""
    from engine.core.endpoints import parse_endpoints
    from engine.llama.native import LlamaModel
    from engine.llama.rpc.host import HostSpec
    from engine.llama.rpc.proxies import RemoteContext, open_remote_target
    from engine.llama.runtime import TargetRuntime
    from engine.models import defaults as models

    endpoints = parse_endpoints(workers)
    path = models.require_verified(models.TARGET)
    model = open_remote_target(
        HostSpec(path, LlamaModel(path).attention_dims()[0], tuple(map(str, endpoints))),
        endpoints,
        timeout=600,
    )
    return TargetRuntime(model, RemoteContext(model, n_ctx=n_ctx, n_batch=512, n_threads=2, flash_attn="off"))


def main(workers: str, lengths: list[int], text_path: Path) -> None:
    runtime, load_bytes, load_s = measured(lambda: open_target(workers, max(lengths) + 64))
    try:
        text = text_path.read_text(encoding="utf-8") * 40
        ids = np.array(runtime.model.tokenize(text, parse_special=False), np.int32)
        split = runtime.model.host.info.split
        print(
            json.dumps(
                {
                    "workers": workers,
                    "split": {"local": split.local_layers, "workers": list(split.worker_layers)},
                    "target_backends": list(runtime.model.host.info.backends),
                    "load": {"bytes": load_bytes, "s": round(load_s, 2)},
                    "prefill": [prefill_figures(runtime, ids[:n]) for n in lengths],
                },
                indent=2,
            )
        )
    finally:
        runtime.close()


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workers", help="the RPC workers, HOST:PORT[,HOST:PORT...]")
    parser.add_argument(
        "lengths", nargs="?", default="1024", help="prefill lengths in tokens, comma-separated"
    )
    parser.add_argument(
        "--text",
        type=Path,
        default=resource_path("samples", "docs", "SOURCES.md"),
        help="the text prefilled (repeated 40 times)",
    )
    args = parser.parse_args(argv)
    main(args.workers, [int(n) for n in args.lengths.split(",")], args.text)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
