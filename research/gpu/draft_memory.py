"""The draft's accelerator memory and scoring time on a CUDA GPU, for the default draft's architecture.

The GPU machine measured (an H200, draft-memory-h200.json) had no network and took 64 MiB of files in,
too little for the default draft's GGUF or its 2.5 GB safetensors copy, so this builds the same architecture from its config (`draft-config.json`, the
dequantized copy's config.json) with random weights, saves it as a model folder, and loads it the
way the app does (`load_draft_model` on `pick_device("cuda")`: bf16 where supported). Memory and time
depend on the architecture, the precision and the prompt's length, not on the weights' values. The
scorer gets no end-of-sequence ids, so every look-ahead step runs (the most a request can cost).

Per prompt length and draft window it reports the allocator's peak (allocated and reserved), the
weights alone, the GPU's used memory (nvidia-smi) idle, with the CUDA context and after each run, the
engine's own prediction (`draft_scoring_need`, what the app checks free memory against) and the
scoring time of each of --repeats passes (after a warm-up pass).
Usage: python research/gpu/draft_memory.py [--lengths 4096,8192,16384,32000] [--windows 4096,0] [--repeats 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from engine.core.settings import RunSettings

CONFIG = Path(__file__).with_name("draft-config.json")
QUESTION_ROWS = 48  # about a question and the assistant header: the rows scored with the question
MIB = 1 << 20


def save_random_draft(config_path: Path, folder: Path, dtype) -> None:
    """The draft's architecture with random weights, as a model folder load_draft_model reads."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(config_path)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.save_pretrained(folder)
    del model
    gc.collect()


def gpu_used_mib() -> float | None:
    """The GPU's used memory as nvidia-smi counts it (CUDA contexts included). The machine measured ran
    nothing else, so the change from before this process touched CUDA is this process's."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        return float(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def measure(scorer, config, n_prompt: int, window: int, settings: RunSettings, repeats: int = 1) -> dict:
    """Scores random tokens `repeats` times: each pass's time, and the peak memory of the last."""
    import torch

    from engine.draft.memory import draft_scoring_need
    from engine.draft.scorer import ScoringParams

    tokens = np.random.default_rng(n_prompt).integers(0, config.vocab_size, n_prompt).tolist()
    params = ScoringParams(
        settings.lookahead, settings.kernel, window, settings.first_scored_layer, QUESTION_ROWS
    )
    seconds = []
    for _ in range(repeats):
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        torch.cuda.synchronize()
        start = time.perf_counter()
        result = scorer.score(tokens, params)
        torch.cuda.synchronize()
        seconds.append(round(time.perf_counter() - start, 3))
    need = draft_scoring_need(config, 2, n_prompt, QUESTION_ROWS)
    return {
        "n_prompt": n_prompt,
        "window": window,
        "steps": result.steps,
        "seconds": seconds,
        "median_seconds": round(float(np.median(seconds)), 3),
        "peak_allocated_mib": round(torch.cuda.max_memory_allocated() / MIB, 1),
        "peak_reserved_mib": round(torch.cuda.max_memory_reserved() / MIB, 1),
        "peak_over_weights_mib": round((torch.cuda.max_memory_allocated() - base) / MIB, 1),
        "predicted_scoring_mib": round(need.total / MIB, 1),
        "predicted_breakdown": need.breakdown(),
        "gpu_used_after_mib": gpu_used_mib(),  # the allocator keeps its reserve: about the peak
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="4096,8192,16384,32000")
    parser.add_argument("--windows", default=f"{RunSettings.draft_window},0")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", type=Path, default=CONFIG)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    import torch

    from engine.draft.loader import load_draft_model, pick_device
    from engine.draft.scorer import ATTN_IMPL, DraftScorer

    idle_mib = gpu_used_mib()
    device = pick_device("cuda")
    torch.zeros(1, device=device.device)  # the context exists from here on
    context_mib = gpu_used_mib()
    settings = RunSettings()
    with tempfile.TemporaryDirectory() as tmp:
        save_random_draft(args.config, Path(tmp), device.dtype)
        start = time.perf_counter()
        model = load_draft_model(Path(tmp), device, ATTN_IMPL)
        load_seconds = time.perf_counter() - start
    weights_mib = torch.cuda.memory_allocated() / MIB
    scorer = DraftScorer(model, eos_ids=set())
    measure(scorer, model.config, 2048, settings.draft_window, settings)  # warm-up: kernels, cuBLAS handles
    runs = []
    for window in (int(w) for w in args.windows.split(",")):
        for n in (int(x) for x in args.lengths.split(",")):
            runs.append(measure(scorer, model.config, n, window, settings, args.repeats))
            print(json.dumps(runs[-1]), flush=True)
    report = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "dtype": str(device.dtype),
        "parameters": sum(p.numel() for p in model.parameters()),
        "weights_mib": round(weights_mib, 1),
        "gpu_used_idle_mib": idle_mib,
        "gpu_used_with_context_mib": context_mib,
        "load_seconds": round(load_seconds, 2),
        "lookahead": settings.lookahead,
        "question_rows": QUESTION_ROWS,
        "runs": runs,
    }
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
