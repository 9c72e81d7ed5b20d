"""Pairing a discovered target with a draft: the smallest model with the target's vocabulary,
else the bundled draft (by spans when its vocabulary differs); the pair's memory from the header."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.models.discover import DiscoveredModel
from engine.models.gguf_facts import read_facts
from engine.pipeline import model_choice
from tests.fixtures.tiny_gguf import write_tiny_gguf_other_vocab, write_tiny_qwen2_gguf


def found(path: Path, name: str) -> DiscoveredModel:
    return DiscoveredModel(
        name, f"test:{name}", "test", path, path.resolve(), path.stat().st_size, read_facts(path)
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    big = write_tiny_qwen2_gguf(folder / "big.gguf", n_layer=4, n_embd=256, n_ff=512, seed=1)
    small = write_tiny_qwen2_gguf(folder / "small.gguf", n_layer=2, n_embd=64, seed=2)
    smaller_other = write_tiny_gguf_other_vocab(folder / "other.gguf")
    return {"big": found(big, "big"), "small": found(small, "small"), "other": found(smaller_other, "other")}


def test_the_smallest_model_with_the_targets_vocabulary_is_the_draft(models):
    choice = model_choice.choose_draft(models["big"], list(models.values()))
    assert choice.path == models["small"].resolved_path
    assert (choice.verdict, choice.selection) == ("identical", "tokens")


def test_without_one_the_bundled_draft_selects_by_spans(models, monkeypatch, tmp_path):
    bundled = write_tiny_gguf_other_vocab(tmp_path / "bundled.gguf", seed=5)
    monkeypatch.setattr(type(model_choice.defaults.DRAFT), "path", property(lambda self: bundled))
    choice = model_choice.choose_draft(models["big"], [models["big"], models["other"]])
    assert choice.path is None
    assert (choice.verdict, choice.selection) == ("different", "spans")
    assert "character spans" in choice.reason


def test_a_model_is_never_its_own_draft_nor_a_larger_one(models, monkeypatch, tmp_path):
    monkeypatch.setattr(
        type(model_choice.defaults.DRAFT), "path", property(lambda self: models["big"].resolved_path)
    )
    choice = model_choice.choose_draft(models["small"], list(models.values()))
    assert choice.path is None  # big is larger, other has another vocabulary: the bundled one
    assert choice.verdict == "identical"


def test_the_kv_cache_follows_the_header(models):
    # 4 layers, K and V, 2 KV heads of 256 / 4 = 64 values, 2 bytes each, per token
    assert model_choice.kv_cache_bytes(models["big"].resolved_path, 1000) == 1000 * 4 * 2 * 2 * 64 * 2


def test_the_plan_counts_weights_cache_and_draft(models, monkeypatch):
    monkeypatch.setattr(model_choice, "scaled_prediction", lambda *_: None)
    plan = model_choice.plan_pair(models["big"], list(models.values()), n_ctx=512)
    draft_bytes = (
        read_facts(models["small"].resolved_path).parameters * model_choice.DRAFT_BYTES_PER_PARAMETER
    )
    expected = (
        models["big"].size_bytes + model_choice.kv_cache_bytes(models["big"].resolved_path, 512) + draft_bytes
    )
    assert plan.needed_bytes == expected
    assert plan.fits
