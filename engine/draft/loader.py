"""Load the draft into transformers, caching the dequantized GGUF as safetensors.

Dequantizing the 0.5B GGUF takes about a minute on 2 cores; the safetensors copy in the
cache dir loads in seconds. The cache key is the GGUF's identity (size, mtime, path),
and the copy is written to a temp dir and renamed, so a crash never leaves half a model.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.core.errors import ModelError
from engine.core.paths import draft_cache_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DraftDevice:
    device: torch.device
    dtype: torch.dtype


def pick_device(preference: str = "auto") -> DraftDevice:
    """CUDA in half precision when there is one; CPU fp32 otherwise (bf16 is ~5x slower on these CPUs)."""
    if preference == "cuda" and not torch.cuda.is_available():
        raise ModelError("device 'cuda' was asked for, but torch sees no CUDA device")
    if preference in ("auto", "cuda") and torch.cuda.is_available():
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return DraftDevice(torch.device("cuda"), dtype)
    return DraftDevice(torch.device("cpu"), torch.float32)


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # the GUI and the CLI show their own progress
    hf_logging.set_verbosity_error()


def _gguf_cache_key(path: Path) -> str:
    st = path.stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def dequantized_dir(gguf_path: Path) -> Path:
    return draft_cache_dir() / f"{gguf_path.stem}-{_gguf_cache_key(gguf_path)}"


def _dequantize_to_cache(gguf_path: Path) -> Path:
    from transformers import AutoModelForCausalLM

    out = dequantized_dir(gguf_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    log.info("dequantizing %s into %s (first load only)", gguf_path.name, out)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                     dtype=torch.float32)
    except Exception as exc:  # transformers raises many types for a bad file
        raise ModelError(f"could not load draft {gguf_path.name} into transformers: {exc}") from exc
    # The weights are already dequantized to fp32; drop the GGUF quantizer marker so
    # save_pretrained writes them as plain safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def ensure_dequantized(gguf_path: Path) -> Path:
    """The safetensors copy of a GGUF draft, made now if missing (setup calls this once)."""
    source = dequantized_dir(gguf_path)
    if (source / "config.json").is_file():
        return source
    _quiet_transformers()
    return _dequantize_to_cache(gguf_path)


def load_draft_model(path: Path, device: DraftDevice, attn_implementation: str, quant: str = "none"):
    """A transformers causal LM from a GGUF file (via the dequantized cache) or a model directory."""
    from transformers import AutoModelForCausalLM

    _quiet_transformers()
    path = Path(path)
    if not path.exists():
        raise ModelError(f"draft model not found: {path}")
    source = path if path.is_dir() else ensure_dequantized(path)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(source), dtype=device.dtype,
                                                     attn_implementation=attn_implementation)
    except Exception as exc:
        raise ModelError(f"could not load draft model from {source}: {exc}") from exc
    model = model.to(device.device).eval()
    if device.device.type == "cpu":
        model = _materialize(model)
        if quant == "int8":
            model = quantize_int8(model)
            gc.collect()  # the fp32 Linear weights go now, not at some later collection
    return model


def _materialize(model):
    """Copy memory-mapped weights into RAM now, so the first request does not pay the page faults
    (and the draft's memory is counted where it is loaded)."""
    with torch.no_grad():
        for param in model.parameters():  # tied weights are one Parameter, copied once
            param.data = param.data.clone()
    return model


def quantize_int8(model):
    """Dynamic int8 Linear layers (fbgemm on AVX2): about 2x faster draft scoring on CPU."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notices are not for our users
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def draft_eos_ids(model) -> set[int]:
    """End-of-sequence ids from the model's config and generation config."""
    ids: set[int] = set()
    for source in (model.config, getattr(model, "generation_config", None)):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    return ids
