"""Load the draft into transformers, caching the dequantized GGUF as safetensors.

Dequantizing the 0.5B GGUF takes about a minute on 2 cores; the safetensors copy in the
cache dir loads in seconds. The cache key is the GGUF's identity (size, mtime, path),
and the copy is written to a partial dir and renamed, so a crash never leaves half a model.
One process makes the copy at a time (a lock per GGUF path); another one waits, then loads
what the first made. The lock holder removes partial dirs a killed save left, and a new copy
replaces the ones made from earlier versions of the same GGUF path.
"""

from __future__ import annotations

import gc
import glob
import hashlib
import logging
import os
import re
import shutil
import tempfile
import warnings
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError

from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import ModelError
from engine.core.hashing import file_version_id
from engine.core.locks import artefact_lock, cache_writes, remove_partials
from engine.core.paths import draft_cache_dir
from engine.core.private import private_dir

log = logging.getLogger(__name__)

SOURCE_FILE = "specprefill-source.txt"  # in each cache dir: the GGUF path it was made from


@dataclass(frozen=True)
class DraftDevice:
    device: torch.device
    dtype: torch.dtype


def pick_device(preference: str = "auto") -> DraftDevice:
    """Where the draft runs. auto: CUDA in half precision (bf16 where supported), then Apple MPS
    in fp16, then the CPU (its number format is chosen by engine.draft.precision; fp32 here until
    then). A GPU asked for by name must be there."""
    if preference == "cpu":
        return DraftDevice(torch.device("cpu"), torch.float32)
    if preference in ("auto", "cuda") and torch.cuda.is_available():
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return DraftDevice(torch.device("cuda"), dtype)
    if preference in ("auto", "mps") and torch.backends.mps.is_available():
        return DraftDevice(torch.device("mps"), torch.float16)
    if preference != "auto":
        raise ModelError(_missing_gpu_reason(preference))
    return DraftDevice(torch.device("cpu"), torch.float32)


def _missing_gpu_reason(preference: str) -> str:
    """Why a GPU asked for by name cannot be used: the one line the error shows."""
    if preference == "cuda":
        build = (
            "this torch build has no CUDA support"
            if torch.version.cuda is None
            else "no CUDA device is visible"
        )
        return f"device 'cuda' was asked for, but torch sees no CUDA device ({build})"
    if preference == "mps":
        return "device 'mps' was asked for, but torch sees no Apple MPS device (macOS on Apple silicon only)"
    return f"unknown device {preference!r}: use auto, cuda, mps or cpu"


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging  # lazy: transformers is heavy

    hf_logging.disable_progress_bar()  # the GUI and the CLI show their own progress
    hf_logging.set_verbosity_error()


def _path_tag(gguf_path: Path) -> str:
    """Names what belongs to one GGUF path whatever its version: its lock and its partial dirs."""
    return f"{gguf_path.stem}-{hashlib.sha256(str(gguf_path.resolve()).encode()).hexdigest()[:16]}"


def _partial_prefix(gguf_path: Path) -> str:
    return f".partial-{_path_tag(gguf_path)}-"


def dequantized_dir(gguf_path: Path) -> Path:
    return draft_cache_dir() / f"{gguf_path.stem}-{file_version_id(gguf_path)}"


def _is_complete(cache: Path) -> bool:
    return (cache / "config.json").is_file()  # the rename is atomic: a dir with a config is whole


def _load_gguf_dequantized(gguf_path: Path):
    from transformers import AutoModelForCausalLM  # lazy: transformers is heavy

    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
        )
    except Exception as exc:  # transformers raises many types for a bad file
        raise ModelError(f"could not load draft {gguf_path.name} into transformers: {exc}") from exc
    # The weights are already dequantized to fp32; drop the GGUF quantizer marker so
    # save_pretrained writes them as plain safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def _save(model, folder: Path) -> None:
    try:
        model.save_pretrained(folder)
    except SafetensorError as exc:  # safetensors reports a full disk as its own error: "... (os error 28)"
        code = re.search(r"os error (\d+)", str(exc))
        raise OSError(int(code[1]) if code else None, str(exc)) from exc


def _dequantize_to_cache(gguf_path: Path, out: Path) -> None:
    log.info("dequantizing %s into %s (first load only)", gguf_path.name, out)
    model = _load_gguf_dequantized(gguf_path)
    with cache_writes(out.parent):
        tmp = Path(tempfile.mkdtemp(prefix=_partial_prefix(gguf_path), dir=out.parent))
        try:
            _save(model, tmp)
            (tmp / SOURCE_FILE).write_text(str(gguf_path.resolve()))
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _made_from(cache: Path) -> str | None:
    with suppress(OSError):
        return (cache / SOURCE_FILE).read_text()
    return None


def _prune_superseded(gguf_path: Path, keep: Path) -> None:
    """Remove the copies made from earlier versions of this GGUF path (each is as big as the model)."""
    source = str(gguf_path.resolve())
    for cache in keep.parent.glob(glob.escape(gguf_path.stem) + "-*"):
        if cache != keep and cache.is_dir() and _made_from(cache) == source:
            log.info("removing %s, made from an earlier version of %s", cache, gguf_path.name)
            shutil.rmtree(cache, ignore_errors=True)


def is_dequantized(gguf_path: Path) -> bool:
    """Whether the safetensors copy of this GGUF (as it is now) is already in the cache."""
    return _is_complete(dequantized_dir(gguf_path))


def ensure_dequantized(gguf_path: Path, cancel: CancelToken = NEVER) -> Path:
    """The safetensors copy of a GGUF draft, made now if missing (setup calls this once)."""
    out = dequantized_dir(gguf_path)
    if _is_complete(out):
        private_dir(out.parent)  # what an earlier version left readable to others is tightened now
        return out
    _quiet_transformers()
    with artefact_lock(out.parent / _path_tag(gguf_path), cancel):
        remove_partials(out.parent, _partial_prefix(gguf_path))
        if not _is_complete(out):  # else another instance made it while this one waited
            _dequantize_to_cache(gguf_path, out)
            _prune_superseded(gguf_path, out)
    return out


def load_draft_model(path: Path, device: DraftDevice, attn_implementation: str, precision: str = "fp32"):
    """A transformers causal LM from a GGUF file (via the dequantized cache) or a model directory.

    precision (engine.draft.precision): on a GPU, device.dtype; on a CPU "fp32", "bf16", or "int8"
    (dynamic int8 Linear layers)."""
    from transformers import AutoModelForCausalLM  # lazy: transformers is heavy

    _quiet_transformers()
    path = Path(path)
    if not path.exists():
        raise ModelError(f"draft model not found: {path}")
    source = path if path.is_dir() else ensure_dequantized(path)
    on_cpu = device.device.type == "cpu"
    dtype = torch.bfloat16 if on_cpu and precision == "bf16" else device.dtype
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(source), dtype=dtype, attn_implementation=attn_implementation
        )
    except Exception as exc:
        raise ModelError(f"could not load draft model from {source}: {exc}") from exc
    model = model.to(device.device).eval()
    if on_cpu:
        if precision == "int8":
            # The Linear weights go from the mapped file straight to int8: never copied in fp32, and
            # quantized in place (a copy of the model held the draft's weights three times, 6.1 GB).
            model = quantize_int8(_materialize(model, keep_mapped=(torch.nn.Linear,)))
        else:
            model = _materialize(model)
        gc.collect()  # the mapped file goes now, not at some later collection
    return model


def _materialize(model, keep_mapped: tuple[type, ...] = ()):
    """Copy memory-mapped weights into RAM now, so the first request does not pay the page faults
    (and the draft's memory is counted where it is loaded). The weights of `keep_mapped` modules
    stay mapped (the int8 path replaces them); every other parameter, their biases too, is copied,
    so nothing keeps the mapped file once they are gone."""
    copied: set[int] = set()
    with torch.no_grad():
        for module in model.modules():
            for name, param in module.named_parameters(recurse=False):
                if id(param) in copied or (isinstance(module, keep_mapped) and name == "weight"):
                    continue  # a tied weight is one Parameter, copied once
                param.data = param.data.clone()
                copied.add(id(param))
    return model


def quantize_int8(model):
    """Dynamic int8 Linear layers (fbgemm on AVX2). torch has deprecated this API; torchao's
    replacement (Int8DynamicActivationInt8WeightConfig, torchao 0.18) ran the draft more than 10x
    slower on a CPU without AVX-512 (2026-12-08, research/draft-precision), so the int8 format stays
    on it while it exists: engine.draft.precision measures int8 only where int8_available() says so,
    and tests/unit/test_draft_precision.py fails the day it is gone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notices are not for our users
        return torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )


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
