"""engine_open: the context size asked for, where the target is said to run, and the names the
engine module still exports."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.core.errors import SettingsError
from engine.core.settings import MAX_CONTEXT_DEFAULT
from engine.pipeline import engine_open
from engine.pipeline.engine_open import _target_backends, _target_where, context_size
from engine.pipeline.placement import TargetPlacement


def test_the_context_is_what_was_asked_within_the_trained_window():
    assert context_size(None, 1 << 20, "t") == MAX_CONTEXT_DEFAULT
    assert context_size(None, 256, "t") == 256
    assert context_size(512, 1024, "t") == 512
    with pytest.raises(SettingsError, match="more than t was trained for"):
        context_size(2048, 1024, "t")


def runtime(host=None) -> SimpleNamespace:
    return SimpleNamespace(model=SimpleNamespace(host=host) if host else SimpleNamespace())


def test_an_in_process_target_is_described_by_its_placement():
    placement = TargetPlacement(0, "cpu", reason="no GPU")
    assert _target_where(runtime(), placement) == placement.where
    assert _target_backends(runtime(), placement) == (placement.backend or "CPU",)


def test_a_target_over_rpc_workers_is_described_by_its_host():
    split = SimpleNamespace(local_layers=10, worker_layers=(9, 9))
    host = SimpleNamespace(info=SimpleNamespace(split=split, backends=("CPU", "RPC a:1", "RPC b:2")))
    placement = TargetPlacement(0, "cpu")
    assert _target_where(runtime(host), placement) == "CPU 10 layers + 2 RPC workers 9+9"
    assert _target_backends(runtime(host), placement) == ("CPU", "RPC a:1", "RPC b:2")


def test_the_engine_module_still_exports_what_it_did():
    from engine.pipeline import engine

    assert engine.EngineInfo is engine_open.EngineInfo and engine.context_size is context_size
    assert engine.default_threads() >= 1
