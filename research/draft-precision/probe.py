"""Run the draft-precision measurement that `--draft-quant auto` runs at a draft's first load on a CPU,
for each draft named, and print its verdict as JSON (nothing is cached).

    python research/draft-precision/probe.py                       # the default draft
    python research/draft-precision/probe.py --draft ~/.cache/specprefill/models/smollm2-135m-instruct-q4_1.gguf
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

from engine.core.resources import calibration_sample
from engine.draft.loader import load_draft_model, pick_device
from engine.draft.precision import SAMPLE_TOKENS, measure_precisions
from engine.draft.scorer import ATTN_IMPL
from engine.llama.native import LlamaModel
from engine.models import defaults


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--draft", type=Path, action="append", help="a draft GGUF (default: the default draft)"
    )
    args = parser.parse_args()
    device = pick_device("cpu")
    for draft in args.draft or [defaults.DRAFT.path]:
        vocab = LlamaModel(draft, vocab_only=True)
        sample = vocab.tokenize(calibration_sample(), parse_special=False)[:SAMPLE_TOKENS]
        vocab.close()
        started = time.perf_counter()
        verdict = measure_precisions(
            lambda name, path=draft: load_draft_model(path, device, ATTN_IMPL, name), sample
        )
        record = {"draft": draft.name, "threads": torch.get_num_threads(), **asdict(verdict)}
        record["probe_s"] = round(time.perf_counter() - started, 1)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
