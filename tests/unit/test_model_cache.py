"""The dequantized-draft cache across processes and on bad disks: one process dequantizes while
another waits and reuses the copy; a killed save's partial dir is removed; a changed GGUF's older
copy goes; a cache that cannot be written is one clear CacheError."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from safetensors import SafetensorError
from transformers import PreTrainedModel

from engine.core.errors import CacheError
from engine.core.paths import draft_cache_dir
from engine.draft.loader import ensure_dequantized
from tests.fixtures.processes import START_TIMEOUT_S, run_at_once, spawn
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf
from tests.fixtures.unwritable import make_read_only  # noqa: F401 (a fixture)

SLOW_SAVE_S = 1.5  # long enough that two processes are saving at the same time
FULL_DISK = "Error while serializing: I/O error: No space left on device (os error 28)"  # safetensors' words


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return draft_cache_dir()


@pytest.fixture
def gguf(tmp_path):
    return write_tiny_qwen2_gguf(tmp_path / "models" / "tiny-draft.gguf", seed=2)


def cache_dirs(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))


def partial_dirs(cache: Path) -> list[Path]:
    return sorted(cache.glob(".partial-*"))


def wrap_save(before=lambda: None, after=lambda: None) -> None:
    """Make every save_pretrained in this (child) process run `before` and `after` around the real one."""
    real_save = PreTrainedModel.save_pretrained

    def save(self, *args, **kwargs):
        before()
        real_save(self, *args, **kwargs)
        after()

    PreTrainedModel.save_pretrained = save


def dequantize_slowly(barrier, gguf: Path, saves: Path) -> Path:
    """Child: each save is recorded and takes SLOW_SAVE_S."""

    def record_and_wait():
        (saves / f"save-{os.getpid()}").touch()
        time.sleep(SLOW_SAVE_S)

    wrap_save(before=record_and_wait)
    barrier.wait(timeout=START_TIMEOUT_S)
    return ensure_dequantized(gguf)


def dequantize_then_hang(gguf: Path, saved: Path) -> None:
    """Child: hangs once the weights are saved, before the rename, until the test kills it."""

    def say_saved_and_hang():
        saved.touch()
        time.sleep(600)

    wrap_save(after=say_saved_and_hang)
    ensure_dequantized(gguf)


def wait_for(path: Path, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


# -- two instances ------------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_on_a_fresh_cache_dequantize_once_and_share_the_copy(cache, gguf, tmp_path):
    saves = tmp_path / "saves"
    saves.mkdir()
    results = run_at_once(dequantize_slowly, gguf, saves)
    assert [status for status, _ in results] == ["ok", "ok"], results
    assert results[0][1] == results[1][1]
    assert [str(p) for p in cache_dirs(cache)] == [results[0][1]]
    assert len(list(saves.iterdir())) == 1, "the second process reused the first one's copy"


# -- leftovers ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_save_killed_before_its_rename_leaves_nothing_after_the_next_start(cache, gguf, tmp_path):
    saved = tmp_path / "saved"
    child = spawn(dequantize_then_hang, gguf, saved)
    try:
        wait_for(saved)
    finally:
        child.kill()
        child.join()
    assert partial_dirs(cache), "the kill left a partial dir"
    out = ensure_dequantized(gguf)
    assert (out / "config.json").is_file()
    assert partial_dirs(cache) == []


def test_a_changed_gguf_replaces_its_older_copy_and_keeps_other_models(cache, gguf, tmp_path):
    namesake = write_tiny_qwen2_gguf(tmp_path / "elsewhere" / gguf.name, seed=3)  # same name, other path
    first = ensure_dequantized(gguf)
    other = ensure_dequantized(namesake)
    st = gguf.stat()
    os.utime(gguf, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new version: a new cache key
    second = ensure_dequantized(gguf)
    assert second != first
    assert cache_dirs(cache) == sorted([second, other])


# -- a cache that cannot be written --------------------------------------------------------


def test_a_read_only_cache_still_serves_its_copy_and_refuses_a_new_one_clearly(
    cache, gguf, tmp_path, make_read_only
):
    made = ensure_dequantized(gguf)
    other = write_tiny_qwen2_gguf(tmp_path / "models" / "other-draft.gguf", seed=3)
    make_read_only(cache)
    assert ensure_dequantized(gguf) == made
    with pytest.raises(
        CacheError, match=f"^cannot write to the cache folder {re.escape(str(cache))}: it is read-only$"
    ):
        ensure_dequantized(other)


def test_a_full_cache_is_one_clear_error_and_leaves_no_partial(cache, gguf, monkeypatch):
    def full_disk(self, *args, **kwargs):
        raise SafetensorError(FULL_DISK)

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full_disk)
    with pytest.raises(
        CacheError, match=f"^cannot write to the cache folder {re.escape(str(cache))}: it is full$"
    ):
        ensure_dequantized(gguf)
    assert partial_dirs(cache) == [] and cache_dirs(cache) == []


def test_the_int8_draft_quantizes_in_place_and_keeps_nothing_of_the_mapped_file(cache, gguf, monkeypatch):
    """The int8 draft answers as a copy-then-quantize load does, without a second model (a deep copy
    held the draft's weights three times), and every parameter left in fp32 lives in RAM of its own."""
    import warnings

    import torch
    from transformers import AutoModelForCausalLM

    from engine.draft.loader import load_draft_model, pick_device

    calls = []
    real_quantize = torch.ao.quantization.quantize_dynamic
    monkeypatch.setattr(
        torch.ao.quantization,
        "quantize_dynamic",
        lambda *a, **k: calls.append(k.get("inplace", False)) or real_quantize(*a, **k),
    )
    loaded = load_draft_model(gguf, pick_device("cpu"), "sdpa", "int8")
    assert calls == [True]  # in place: no second model
    monkeypatch.setattr(torch.ao.quantization, "quantize_dynamic", real_quantize)
    reference = AutoModelForCausalLM.from_pretrained(
        str(ensure_dequantized(gguf)), dtype=torch.float32
    ).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.ao.quantization.quantize_dynamic(reference, {torch.nn.Linear}, dtype=torch.qint8)
    ids = torch.tensor([list(range(1, 40))])
    with torch.inference_mode():
        assert torch.equal(loaded(ids).logits, reference(ids).logits)
    mapped = [n for n, p in loaded.named_parameters() if not p.untyped_storage().resizable()]
    assert mapped == []  # safetensors' mapped storages cannot be resized; a copy's can
