"""Where each model runs, and memory counted where it lives (the GPU-path issue).

CI has no GPU: device selection, the target's placement, the memory accounting and the doctor
lines are tested by pretending (monkeypatching torch's CUDA/MPS availability and llama.cpp's
offload support). The tests marked `needs_cuda` run for real on a machine with CUDA.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
import torch

from engine.cli.main import main as cli_main
from engine.core import memory
from engine.core.errors import InsufficientMemoryError, ModelError
from engine.core.events import RunFinished
from engine.core.formatting import format_bytes
from engine.core.memory import MemoryNeed, available_bytes, needs_by_device, require_all_fit
from engine.core.setting_schema import option_of
from engine.core.settings import ModelSettings, RunSettings
from engine.draft.loader import DraftDevice, load_draft_model, pick_device
from engine.draft.scorer import ATTN_IMPL
from engine.llama.memory import load_needs
from engine.llama.native import LlamaModel, build_info
from engine.pipeline import Engine, diagnostics
from engine.pipeline import engine_open as engine_module
from engine.pipeline.peak_memory import PeakMemory, held_bytes
from engine.pipeline.placement import ALL_LAYERS, NO_OFFLOAD, gpu_backend, place_target

CUDA_FLAGS = "CUDA : ARCHS = 890 | USE_GRAPHS = 1 | CPU : SSE3 = 1 | AVX2 = 1"
METAL_FLAGS = "Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1 | ARM_FMA = 1"
CPU_FLAGS = "CPU : SSE3 = 1 | AVX2 = 1 | OPENMP = 1"
GB = 1 << 30

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI has none)")


def pretend_gpus(monkeypatch, cuda: bool = False, bf16: bool = True, mps: bool = False) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


# -- which device the draft gets ---------------------------------------------------


@pytest.mark.parametrize("bf16, dtype", [(True, torch.bfloat16), (False, torch.float16)])
def test_auto_picks_cuda_in_half_precision(monkeypatch, bf16, dtype):
    pretend_gpus(monkeypatch, cuda=True, bf16=bf16, mps=True)
    for preference in ("auto", "cuda"):
        assert pick_device(preference) == DraftDevice(torch.device("cuda"), dtype)


def test_auto_picks_mps_in_fp16_when_there_is_no_cuda(monkeypatch):
    pretend_gpus(monkeypatch, mps=True)
    for preference in ("auto", "mps"):
        assert pick_device(preference) == DraftDevice(torch.device("mps"), torch.float16)


def test_auto_falls_back_to_cpu_fp32_and_cpu_is_cpu_even_with_a_gpu(monkeypatch):
    pretend_gpus(monkeypatch)
    assert pick_device("auto") == DraftDevice(torch.device("cpu"), torch.float32)
    pretend_gpus(monkeypatch, cuda=True, mps=True)
    assert pick_device("cpu") == DraftDevice(torch.device("cpu"), torch.float32)


@pytest.mark.parametrize(
    "preference, says", [("cuda", "torch sees no CUDA device"), ("mps", "torch sees no Apple MPS device")]
)
def test_a_gpu_asked_for_but_missing_is_one_clear_error(monkeypatch, preference, says):
    pretend_gpus(monkeypatch)
    with pytest.raises(ModelError, match=says) as err:
        pick_device(preference)
    assert f"device '{preference}' was asked for" in str(err.value) and "\n" not in str(err.value)


def test_mps_is_a_device_setting_with_a_label():
    option = option_of(ModelSettings, "device")
    assert option.choices == ("auto", "cuda", "mps", "cpu")
    assert option.label_for("mps") == "Apple GPU (MPS)"
    assert ModelSettings(device="mps").device == "mps"


# -- where the target runs ---------------------------------------------------------


@pytest.mark.parametrize(
    "draft, flags, backend",
    [("cuda", CUDA_FLAGS, "CUDA"), ("mps", METAL_FLAGS, "Metal"), ("cuda", "", "CUDA")],
)
def test_the_target_joins_a_gpu_draft_when_llama_cpp_can_offload(draft, flags, backend):
    placement = place_target(draft, gpu_offload=True, build_flags=flags)
    assert placement.offloaded and placement.n_gpu_layers == ALL_LAYERS
    assert placement.memory_device == draft and placement.reason == ""
    assert placement.where == placement.describe() == f"GPU (all layers, {backend})"


def test_a_build_without_gpu_offload_keeps_the_target_on_the_cpu_and_says_why():
    placement = place_target("cuda", gpu_offload=False, build_flags=CPU_FLAGS)
    assert (placement.n_gpu_layers, placement.memory_device, placement.where) == (0, "cpu", "CPU")
    assert placement.reason == NO_OFFLOAD
    assert placement.describe() == "CPU (llama.cpp build has no GPU offload)"


def test_a_cpu_draft_keeps_the_target_on_the_cpu_too():
    placement = place_target("cpu", gpu_offload=True, build_flags=CUDA_FLAGS)
    assert not placement.offloaded and placement.memory_device == "cpu"
    assert "draft runs on cpu" in placement.reason


def test_the_gpu_backend_is_read_from_the_build_flags():
    assert (gpu_backend(CUDA_FLAGS), gpu_backend(METAL_FLAGS), gpu_backend(CPU_FLAGS)) == (
        "CUDA",
        "Metal",
        "",
    )


# -- memory, counted where it lives --------------------------------------------------

TARGET_WEIGHTS = 900_000_000
TARGET_KV_512 = 2 * 28 * 2 * 128 * 2 * 512  # layers x (K and V) x KV heads x head size x f16 x tokens
DRAFT_WEIGHTS = 500_000_000


def fake_target() -> SimpleNamespace:
    return SimpleNamespace(tensor_bytes=lambda: TARGET_WEIGHTS, attention_dims=lambda: (28, 2, 128))


def labels(need: MemoryNeed) -> dict[str, int]:
    return dict(need.parts)


def test_a_target_not_offloaded_counts_in_ram_and_a_gpu_draft_on_its_gpu():
    placement = place_target("cuda", gpu_offload=False)
    needs = load_needs(fake_target(), 512, placement.memory_device, DRAFT_WEIGHTS, "cuda")
    assert labels(needs["cpu"]) == {
        "target weights": TARGET_WEIGHTS,
        "target KV cache for 512 tokens": TARGET_KV_512,
    }
    assert labels(needs["cuda"]) == {"draft weights": DRAFT_WEIGHTS}


def test_an_offloaded_target_counts_on_the_gpu_with_the_draft():
    placement = place_target("cuda", gpu_offload=True, build_flags=CUDA_FLAGS)
    needs = load_needs(fake_target(), 512, placement.memory_device, DRAFT_WEIGHTS, "cuda")
    assert list(needs) == ["cuda"]
    assert needs["cuda"].total == TARGET_WEIGHTS + TARGET_KV_512 + DRAFT_WEIGHTS


def test_on_the_cpu_everything_counts_in_ram_in_one_need():
    needs = load_needs(fake_target(), 512, "cpu", DRAFT_WEIGHTS, "cpu")
    assert list(needs) == ["cpu"] and needs["cpu"].total == TARGET_WEIGHTS + TARGET_KV_512 + DRAFT_WEIGHTS
    assert needs["cpu"].what == "loading the models with a 512-token context"


def test_each_device_is_checked_against_its_own_free_memory(monkeypatch):
    free = {"cpu": 64 * GB, "cuda": 1 * GB}
    monkeypatch.setattr(memory, "available_bytes", lambda device: free[device])
    needs = needs_by_device(
        "loading", [("cpu", "target weights", 2 * GB), ("cuda", "draft weights", GB // 2)]
    )
    require_all_fit(needs)  # RAM's plenty does not pay for the GPU, nor the other way round
    short = needs_by_device("loading", [("cpu", "target weights", 2 * GB), ("cuda", "draft weights", 2 * GB)])
    with pytest.raises(InsufficientMemoryError) as err:
        require_all_fit(short)
    message = str(err.value)
    assert f"needs about {format_bytes(2 * GB)} on cuda (draft weights {format_bytes(2 * GB)})" in message
    assert f"only {format_bytes(GB)} is available" in message and "\n" not in message


def test_a_refusal_names_the_shortfall_even_when_the_rounded_sizes_read_alike(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device: 16 * GB)
    need = needs_by_device("loading", [("cpu", "target weights", 16 * GB + 40 * 1024**2)])
    with pytest.raises(InsufficientMemoryError) as err:
        require_all_fit(need)
    assert f"({format_bytes(40 * 1024**2)} short)" in str(err.value)


def test_free_memory_is_read_per_device(monkeypatch):
    ram = psutil.virtual_memory().available
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * GB, 80 * GB))
    assert available_bytes("cuda") == 3 * GB
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 2 * GB)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: GB // 2)
    assert available_bytes("mps") == min(ram, GB + GB // 2)  # Metal's headroom, within the shared RAM
    assert abs(available_bytes("cpu") - ram) < GB


def test_mps_without_metal_figures_falls_back_to_the_system_ram(monkeypatch):
    def unsupported():
        raise RuntimeError("MPS backend is not available")

    monkeypatch.setattr(torch.mps, "recommended_max_memory", unsupported)
    assert abs(available_bytes("mps") - psutil.virtual_memory().available) < GB


def test_the_target_is_checked_on_the_cpu_then_opened_on_the_gpu(pair, monkeypatch):
    """Refuse with the figures before anything is copied to a GPU; then offload all layers."""
    target_path, draft_path = pair
    opened, checked = [], []

    def spy_model(path, n_gpu_layers=0):
        opened.append(n_gpu_layers)
        return LlamaModel(path, n_gpu_layers=n_gpu_layers)  # a CPU build ignores the layers

    monkeypatch.setattr(engine_module, "LlamaModel", spy_model)
    monkeypatch.setattr(engine_module, "require_all_fit", lambda needs: checked.append(sorted(needs)))
    placement = place_target("cuda", gpu_offload=True, build_flags=CUDA_FLAGS)
    device = DraftDevice(torch.device("cpu"), torch.float32)  # the draft itself never loads here
    runtime, _ = engine_module._open_target(
        ModelSettings(n_ctx=256, n_batch=64), target_path, "t", draft_path, "d", device, placement, threads=1
    )
    runtime.close()
    assert opened == [0, ALL_LAYERS] and checked == [["cpu", "cuda"]]


def test_a_gpu_too_small_for_the_offloaded_target_is_refused_before_offloading(pair, monkeypatch):
    target_path, draft_path = pair
    opened = []
    monkeypatch.setattr(
        engine_module,
        "LlamaModel",
        lambda path, n_gpu_layers=0: opened.append(n_gpu_layers) or LlamaModel(path),
    )
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1000 if device == "cuda" else 64 * GB)
    placement = place_target("cuda", gpu_offload=True, build_flags=CUDA_FLAGS)
    device = DraftDevice(torch.device("cuda"), torch.float16)
    with pytest.raises(InsufficientMemoryError, match=r"on cuda \(target weights .* \+ draft weights"):
        engine_module._open_target(
            ModelSettings(n_ctx=256, n_batch=64),
            target_path,
            "t",
            draft_path,
            "d",
            device,
            placement,
            threads=1,
        )
    assert opened == [0]


def test_the_loaded_engine_says_where_each_model_runs(engine):
    """The tiny engine's draft is on the CPU, so the target is too, whatever the build."""
    why = NO_OFFLOAD if not build_info()[1] else "the draft runs on cpu, so the target does too"
    info = engine.info
    assert (info.device, info.target_device, info.target_offload_reason) == ("cpu", "CPU", why)


# -- measuring the draft on each device -----------------------------------------------


def test_mps_memory_is_read_from_its_allocator_and_its_peak_sampled(monkeypatch):
    allocated = {"bytes": 100}
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: allocated["bytes"])
    assert held_bytes(torch.device("mps")) == 100
    with PeakMemory("mps", interval=0.001) as peak:
        allocated["bytes"] = 400
        time.sleep(0.1)  # many samples see the peak
        allocated["bytes"] = 250
    assert peak.peak_bytes == 300  # above the 100 held at entry


def test_cpu_memory_is_the_process_rss():
    assert abs(held_bytes(torch.device("cpu")) - psutil.Process().memory_info().rss) < 64 << 20


# -- doctor ---------------------------------------------------------------------------


def test_doctor_torch_line_names_the_draft_gpu_and_free_memory_per_device(monkeypatch):
    pretend_gpus(monkeypatch, cuda=True, bf16=True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * GB, 80 * GB))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake H200")
    check = diagnostics.check_torch(ModelSettings())
    assert check.ok and "draft on cuda (bfloat16, Fake H200)" in check.text
    assert "free memory: cuda 3.0 GB of 80.0 GB, RAM " in check.text


def test_doctor_torch_line_on_a_cpu_machine(monkeypatch):
    pretend_gpus(monkeypatch)
    check = diagnostics.check_torch(ModelSettings())
    assert check.ok and "draft on cpu, " in check.text and "free memory: RAM " in check.text


@pytest.mark.parametrize(
    "flags, offload, draft, says",
    [
        (CPU_FLAGS, False, "cuda", "target: CPU (llama.cpp build has no GPU offload), flash attention off"),
        (CUDA_FLAGS, True, "cuda", "GPU offload: all 2 layers (CUDA), flash attention auto"),
        (
            CUDA_FLAGS,
            True,
            "cpu",
            "target: CPU (the draft runs on cpu, so the target does too), flash attention off",
        ),
    ],
)
def test_doctor_llama_line_says_where_the_target_runs(pair, monkeypatch, flags, offload, draft, says):
    monkeypatch.setattr(diagnostics, "build_info", lambda: (flags, offload))
    check = diagnostics.check_llama(pair[0], draft)
    assert says in check.text and "restore positions supported" in check.text and check.text.endswith(flags)


def test_doctor_exits_2_with_one_line_when_the_asked_for_gpu_is_missing(
    pair, cache_home, monkeypatch, capsys
):
    pretend_gpus(monkeypatch)
    target, draft = pair
    code = cli_main(["doctor", "--device", "cuda", "--target", str(target), "--draft", str(draft)])
    out, err = capsys.readouterr()
    assert code == 2 and "torch sees no CUDA device" in out
    assert len(err.strip().splitlines()) == 1 and "cannot run: torch:" in err


# -- on a real GPU (skipped where there is none) -------------------------------------


@needs_cuda
def test_real_cuda_draft_loads_in_half_precision_and_is_measured_there(pair, cache_home):
    device = pick_device("auto")
    assert device.device.type == "cuda" and device.dtype in (torch.bfloat16, torch.float16)
    before = held_bytes(device.device)
    model = load_draft_model(pair[1], device, ATTN_IMPL)
    weights = next(model.parameters())
    assert weights.device.type == "cuda" and weights.dtype == device.dtype
    assert held_bytes(device.device) > before
    assert 0 < available_bytes("cuda") <= torch.cuda.mem_get_info()[1]


@needs_cuda
def test_real_cuda_peak_memory_counts_what_the_block_allocated():
    with PeakMemory("cuda") as peak:
        block = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        del block
    assert peak.peak_bytes >= 64 << 20


@needs_cuda
def test_real_cuda_engine_runs_spec_with_the_draft_on_the_gpu(pair, cache_home):
    target, draft = pair
    loaded = Engine.load(
        ModelSettings(target_path=target, draft_path=draft, device="cuda", n_ctx=512, n_batch=64)
    )
    try:
        assert loaded.info.device == "cuda"
        flags, offload = build_info()
        assert loaded.info.target_device == place_target("cuda", offload, flags).where
        document = " ".join(f"Item {i} is a stone." for i in range(40))
        events = list(
            loaded.stream(
                document,
                "Which item?",
                "spec",
                RunSettings(force=True, keep=0.25, chunk_size=8, max_new_tokens=4),
            )
        )
        result = next(e.result for e in events if isinstance(e, RunFinished))
        assert 0 < result.kept_fraction < 1 and result.draft_peak_mem_bytes > 0
        assert np.isfinite(result.ttft_s)
    finally:
        loaded.close()


@pytest.mark.parametrize(
    "draft, gpu_offload, requested, expected",
    [
        ("cpu", True, "auto", "off"),  # llama.cpp's CPU kernel is the slower one
        ("cuda", False, "auto", "off"),
        ("cuda", True, "auto", "auto"),  # on a GPU llama.cpp decides
        ("cpu", True, "on", "on"),
        ("cuda", True, "off", "off"),
    ],
)
def test_flash_attention_is_off_on_the_cpu_unless_asked_for(draft, gpu_offload, requested, expected):
    assert place_target(draft, gpu_offload, CUDA_FLAGS).flash_attn(requested) == expected
