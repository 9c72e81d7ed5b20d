"""Bytes the target sends over RPC on loopback: at load (its workers' weights), per prefilled
token and per decoded token, with the time each took; over the workers given on the command line.

python resources/reports/rpc/transfer_probe.py 127.0.0.1:50052,127.0.0.1:50053 [TOKENS[,TOKENS...]]
Loopback counts each byte once as sent: the figures are the `lo` interface's tx bytes.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from engine.api import ModelSettings, load_engine


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


def prefill_figures(engine, tokens: np.ndarray) -> dict:
    positions = np.arange(len(tokens), dtype=np.int32)
    logits, sent, seconds = measured(lambda: engine.runtime.prefill(tokens, positions))
    steps = 8
    _, decode_sent, decode_s = measured(lambda: list(engine.runtime.generate(logits, len(tokens), steps + 1)))
    return {"tokens": len(tokens), "bytes": sent, "bytes_per_token": sent / len(tokens), "s": round(seconds, 2),
            "decode_bytes_per_token": decode_sent / steps, "decode_s_per_token": round(decode_s / steps, 3)}


def main(workers: str, lengths: list[int]) -> None:
    engine, load_bytes, load_s = measured(lambda: load_engine(ModelSettings(rpc=workers)))
    try:
        text = open("resources/samples/docs/SOURCES.md").read() * 40
        ids = np.array(engine.tokenize(text), np.int32)
        info = engine.info
        print(json.dumps({
            "workers": workers, "target_device": info.target_device, "target_backends": list(info.target_backends),
            "load": {"bytes": load_bytes, "s": round(load_s, 2)},
            "prefill": [prefill_figures(engine, ids[:n]) for n in lengths],
        }, indent=2))
    finally:
        engine.close()


if __name__ == "__main__":
    main(sys.argv[1], [int(n) for n in (sys.argv[2] if len(sys.argv) > 2 else "1024").split(",")])
