"""The target in a host process (engine.llama.rpc): the same numbers as in-process, exceptions
and Cancel across the boundary, a host that dies ends the call and the next call restarts it.
No RPC workers here (tests/integration/test_rpc_workers.py has real ones): the host's machinery
is the same with none."""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest

from engine.cli.worker import binding_warning, llama_device
from engine.core.cancel import CancelToken
from engine.core.endpoints import Endpoint, parse_endpoints, parse_split
from engine.core.errors import Cancelled, ModelError, SettingsError, WorkerLostError
from engine.core.settings import ModelSettings
from engine.llama.native import LlamaContext, LlamaModel
from engine.llama.rpc.host import HostSpec
from engine.llama.rpc.proxies import RemoteContext, open_remote_target
from engine.llama.rpc.split import split_layers
from engine.llama.rpc.workers import require_reachable
from engine.llama.runtime import TargetRuntime

CTX = dict(n_ctx=512, n_batch=8, n_threads=1, flash_attn="off")


@pytest.fixture(scope="module")
def target(pair):
    return pair[0]


@pytest.fixture
def remote(target):
    model = open_remote_target(HostSpec(target, 2, ()), (), timeout=30)
    runtime = TargetRuntime(model, RemoteContext(model, **CTX))
    yield runtime
    runtime.close()


def tokens_of(runtime: TargetRuntime, n: int) -> tuple[np.ndarray, np.ndarray]:
    ids = runtime.model.tokenize("the quick brown fox jumps over the lazy dog " * 8, parse_special=False)[:n]
    return np.array(ids, np.int32), np.arange(len(ids), dtype=np.int32)


def greedy_answer(runtime: TargetRuntime, tokens: np.ndarray, positions: np.ndarray) -> list[int]:
    logits = runtime.prefill(tokens, positions)
    return [g.token for g in runtime.generate(logits, int(positions[-1]) + 1, 8)]


def test_the_host_gives_the_in_process_logits_and_answer(remote, target):
    tokens, positions = tokens_of(remote, 40)
    local_model = LlamaModel(target)
    local = TargetRuntime(local_model, LlamaContext(local_model, **CTX))
    try:
        np.testing.assert_array_equal(remote.prefill(tokens, positions), local.prefill(tokens, positions))
        assert greedy_answer(remote, tokens, positions) == greedy_answer(local, tokens, positions)
        assert remote.model.description() == local_model.description()
    finally:
        local.close()


def test_gapped_positions_and_a_sibling_context_work_through_the_host(remote):
    assert remote.accepts_gapped_positions()
    sibling = remote.sibling()
    try:
        tokens, positions = tokens_of(remote, 16)
        assert sibling.context.id != remote.context.id
        np.testing.assert_array_equal(sibling.prefill(tokens, positions), remote.prefill(tokens, positions))
    finally:
        sibling.close()
    assert remote.model.host.info.backends == ("CPU",)


def test_an_error_in_the_host_is_raised_here_and_the_host_goes_on(remote):
    with pytest.raises(ValueError, match="does not fit capacity"):
        remote.context.decode(np.zeros(9, np.int32), np.arange(9, dtype=np.int32), True)  # n_batch is 8
    tokens, positions = tokens_of(remote, 8)
    assert remote.prefill(tokens, positions).shape == (remote.model.n_vocab,)


def test_a_cancelled_prefill_raises_cancelled_and_the_next_one_runs(remote):
    tokens, positions = tokens_of(remote, 64)
    cancel = CancelToken()
    steps = remote.iter_prefill(tokens, positions, cancel)
    next(steps)
    cancel.cancel()
    with pytest.raises(Cancelled):
        for _ in steps:
            pass
    assert remote.prefill(tokens, positions).shape == (remote.model.n_vocab,)


def test_a_host_that_dies_mid_prefill_ends_the_run_and_the_next_run_restarts_it(remote):
    tokens, positions = tokens_of(remote, 64)
    expected = remote.prefill(tokens, positions)
    generation = remote.context.generation
    old_pid = remote.model.host._proc.pid
    steps = remote.iter_prefill(tokens, positions)
    next(steps)
    os.kill(old_pid, signal.SIGKILL)
    with pytest.raises(WorkerLostError, match="host process stopped"):
        for _ in steps:
            pass
    np.testing.assert_array_equal(remote.prefill(tokens, positions), expected)  # a new host, the same numbers
    assert remote.model.host._proc.pid != old_pid
    assert remote.context.generation != generation  # the old KV cache is gone, and nobody may think otherwise


def test_a_host_that_died_between_two_batches_ends_the_run_rather_than_filling_an_empty_cache(remote):
    """The host is dead before the next batch is sent: the call starts a new host, whose context is
    empty, so the run must end; continuing would prefill the rest onto nothing."""
    tokens, positions = tokens_of(remote, 64)
    expected = remote.prefill(tokens, positions)
    host = remote.model.host._proc
    steps = remote.iter_prefill(tokens, positions)
    next(steps)
    host.kill()
    host.wait()  # dead for sure before the next batch: no race with the kill
    with pytest.raises(WorkerLostError, match="host process stopped between two calls"):
        for _ in steps:
            pass
    np.testing.assert_array_equal(remote.prefill(tokens, positions), expected)


def test_a_worker_nobody_listens_on_is_named_before_anything_starts(free_port):
    endpoint = Endpoint("127.0.0.1", free_port)
    with pytest.raises(Exception, match=f"RPC worker 127.0.0.1:{free_port} refused the connection"):
        require_reachable((endpoint,))


def test_endpoints_and_splits_are_checked_when_the_settings_are_built():
    assert parse_endpoints("127.0.0.1:50052, 127.0.0.1:50053") == (
        Endpoint("127.0.0.1", 50052),
        Endpoint("127.0.0.1", 50053),
    )
    assert str(parse_endpoints("[::1]:7")[0]) == "[::1]:7"
    for bad in ("127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "a:1,a:1"):
        with pytest.raises(SettingsError):
            parse_endpoints(bad)
    assert parse_split("2,1,1", 2) == (2.0, 1.0, 1.0)
    with pytest.raises(SettingsError, match="needs 3"):
        ModelSettings(rpc="127.0.0.1:1,127.0.0.1:2", rpc_split="1,1")
    with pytest.raises(SettingsError, match="workers' must not all be 0"):
        parse_split("1,0", 1)


@pytest.mark.parametrize(
    "n_layers, weights, local, workers",
    [
        (28, (1.0, 1.0, 1.0), 10, (9, 9)),  # largest remainder: 9.33 each, the first gets the spare layer
        (28, (2.0, 1.0, 1.0), 14, (7, 7)),
        (28, (0.0, 1.0), 0, (28,)),
        (
            3,
            (5.0, 1.0, 1.0),
            2,
            (1, 0),
        ),  # 2.14, 0.43, 0.43: the spare layer goes to the first largest remainder
    ],
)
def test_layers_split_in_proportion_and_add_up(n_layers, weights, local, workers):
    split = split_layers(n_layers, weights)
    assert (split.local_layers, split.worker_layers) == (local, workers)
    assert split.local_layers + split.n_gpu_layers == n_layers


def test_a_worker_bound_beyond_loopback_warns_that_rpc_has_no_authentication():
    assert binding_warning(Endpoint("127.0.0.1", 50052)) == ""
    assert binding_warning(Endpoint("localhost", 50052)) == ""
    assert binding_warning(Endpoint("::1", 50052)) == ""
    warning = binding_warning(Endpoint("0.0.0.0", 50052))
    assert "no authentication" in warning and "0.0.0.0:50052" in warning and "trusted networks" in warning
    assert (
        llama_device("cuda:1") == "CUDA1" and llama_device("cpu") == "CPU" and llama_device("cuda") == "CUDA0"
    )


def test_the_desktop_bundle_says_plainly_that_it_cannot_use_workers(monkeypatch, target):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    with pytest.raises(ModelError, match="desktop bundle cannot start"):
        open_remote_target(HostSpec(target, 2, ()), (), timeout=30)


def test_a_token_crosses_to_the_host_once_per_method(remote, monkeypatch):
    model, calls = remote.model, []
    real_call = model.host.call

    def counted(*args, **kwargs):
        calls.append(args[1])
        return real_call(*args, **kwargs)

    monkeypatch.setattr(model.host, "call", counted)
    first = [model.token_piece(7), model.token_piece(7), model.is_eog(7), model.is_eog(7)]
    assert calls == ["token_piece", "is_eog"]
    assert first[0] == first[1] and first[2] is False
