"""The setup scripts under packaging/: preflight, the torch choice, the cached llama.cpp wheel.

They are stdlib-only scripts, not a package, so they are imported from their folder. Nothing here
installs or builds for real: pip and the compiler are replaced by small stand-ins.
"""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "packaging"))

import build_llama_wheel  # noqa: E402
import install_torch  # noqa: E402
import preflight  # noqa: E402


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    return tmp_path / "cache"


# --- build_llama_wheel: the cache key ---------------------------------------------------------------


def test_key_names_no_host_cpu_only_the_architecture():
    # One portable wheel (every CPU variant inside) serves every CPU of this architecture.
    patch = (REPO / "packaging" / "llama-cpp-gapped-positions.patch").read_bytes()
    patch_digest = hashlib.sha256(patch + build_llama_wheel.our_cmake_args().encode()).hexdigest()[:12]
    expected = f"llama_cpp_python-0.3.36-patch-{patch_digest}-{platform.machine().lower()}"
    assert build_llama_wheel.wheel_key() == expected
    assert build_llama_wheel.wheel_key("") == expected
    assert build_llama_wheel.wheel_key(build_llama_wheel.extra_cmake_args("cpu", "")) == expected


@pytest.mark.parametrize(
    ("extra", "backend"),
    [
        ("-DGGML_CUDA=on", "cuda"),
        ("-DGGML_METAL=ON", "metal"),
        ("-DGGML_VULKAN=1", "vulkan"),
        ("-DGGML_HIP=on", "hip"),
        ("-DGGML_HIPBLAS:BOOL=TRUE", "hip"),
        ("-DGGML_CUDA=off", "cpu"),
        ("-DGGML_NATIVE=off", "cpu"),
    ],
)
def test_extra_args_change_the_key_and_name_the_backend(extra, backend):
    key = build_llama_wheel.wheel_key(extra)
    assert key != build_llama_wheel.wheel_key()
    digest = hashlib.sha256(extra.encode()).hexdigest()[:8]
    assert key.endswith(
        f"-patch-{key.split('-patch-')[1][:12]}-{backend}-{digest}-{platform.machine().lower()}"
    )
    assert build_llama_wheel.backend_of(extra) == backend


def test_key_does_not_change_with_the_host_cpu_flags(monkeypatch):
    before = build_llama_wheel.wheel_key()
    real_read_text = Path.read_text
    monkeypatch.setattr(
        Path,
        "read_text",
        lambda self, *a, **k: (
            "flags : fpu avx2 amx_tile\n" if str(self) == "/proc/cpuinfo" else real_read_text(self, *a, **k)
        ),
    )
    assert build_llama_wheel.wheel_key() == before


def test_the_build_is_portable_with_the_four_x86_variants():
    args = build_llama_wheel.our_cmake_args("x86_64")
    assert (
        "-DGGML_NATIVE=OFF" in args
        and "-DGGML_BACKEND_DL=ON" in args
        and "-DGGML_CPU_ALL_VARIANTS=ON" in args
    )
    assert "-DGGML_CPU_VARIANT_ONLY=x64,haswell,skylakex,sapphirerapids" in args
    assert "VARIANT_ONLY" not in build_llama_wheel.our_cmake_args("aarch64")  # llama.cpp's own ARM set


def test_gpu_choice_and_user_cmake_args_are_appended_after_ours(monkeypatch):
    monkeypatch.setenv("CMAKE_ARGS", "-DGGML_VULKAN=on  -DFOO=1")
    extra = build_llama_wheel.extra_cmake_args("cuda")
    assert extra == "-DGGML_CUDA=on -DGGML_VULKAN=on -DFOO=1"
    assert build_llama_wheel.build_env(extra)["CMAKE_ARGS"] == f"{build_llama_wheel.our_cmake_args()} {extra}"
    assert build_llama_wheel.build_env("")["CMAKE_ARGS"] == build_llama_wheel.our_cmake_args()


# --- build_llama_wheel: building, failing, installing ------------------------------------------------


def fake_build(monkeypatch, tmp_path, script: str) -> None:
    """Skip the sdist download and patch; the 'build' is a Python one-liner given the output folder."""
    monkeypatch.setattr(build_llama_wheel, "download_sdist", lambda dest, log: tmp_path / "sdist.tar.gz")
    monkeypatch.setattr(build_llama_wheel, "unpack_and_patch", lambda sdist, work, log: tmp_path)
    monkeypatch.setattr(
        build_llama_wheel, "wheel_command", lambda src, out_dir: [sys.executable, "-c", script, str(out_dir)]
    )
    monkeypatch.setattr(
        build_llama_wheel,
        "build_rpc_server",
        lambda src, wheel, out_dir, log: (out_dir / build_llama_wheel.RPC_SERVER).write_bytes(b"rpc"),
    )


FAILING_BUILD = "import sys\nfor i in range(100): print(f'build line {i}')\nsys.exit(3)"
WRITING_BUILD = (
    "import pathlib, sys\nprint('compiling')\n"
    "pathlib.Path(sys.argv[1], 'llama_cpp_python-0.3.36-py3-none-any.whl').write_bytes(b'wheel')"
)


def test_a_failed_build_shows_the_log_tail_the_log_path_and_a_hint(cache_home, tmp_path, monkeypatch, capsys):
    fake_build(monkeypatch, tmp_path, FAILING_BUILD)
    assert build_llama_wheel.main([]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # stdout carries only a wheel's path
    log = cache_home / "specprefill" / "wheels" / f"build-{build_llama_wheel.wheel_key()}.log"
    assert "build line 0\n" in log.read_text() and "build line 99\n" in log.read_text()
    assert (
        f"about {build_llama_wheel.BUILD_MINUTES_ON_2_CORES} minutes on 2 cores" in err
        and f"full output: {log}" in err
    )
    tail = err.split(f"---- last 40 lines of {log} ----\n", 1)[1].split("---- end of the log's tail ----")[0]
    assert tail.splitlines() == [f"build line {i}" for i in range(60, 100)]
    assert "build FAILED (python exited with status 3)" in err
    assert f"full log: {log}" in err and "build-essential" in err
    assert [path.name for path in log.parent.iterdir()] == [log.name]  # no half-built wheel folder is left


def test_a_failed_step_is_named_by_its_command():
    assert build_llama_wheel.command_name([sys.executable, "-m", "pip", "wheel", "-v"]) == "pip wheel"
    assert build_llama_wheel.command_name(["/usr/bin/patch", "-p1"]) == "patch"


def test_a_missing_tool_fails_as_a_step_with_its_hint(tmp_path):
    with (tmp_path / "log").open("w") as log, pytest.raises(build_llama_wheel.StepFailed) as failure:
        build_llama_wheel.run_logged([str(tmp_path / "no-such-patch")], log, build_llama_wheel.PATCH_HINT)
    assert failure.value.hint == build_llama_wheel.PATCH_HINT
    assert "command not found" in (tmp_path / "log").read_text()


def test_a_built_wheel_is_cached_printed_and_reused(cache_home, tmp_path, monkeypatch, capsys):
    fake_build(monkeypatch, tmp_path, WRITING_BUILD)
    assert build_llama_wheel.main(["--print-path"]) == 0
    out, err = capsys.readouterr()
    wheel = Path(out.strip())
    assert wheel.is_file() and wheel.parent.name == build_llama_wheel.wheel_key()
    assert "compiling" in err and "built in" in err
    fake_build(monkeypatch, tmp_path, FAILING_BUILD)  # a rebuild now would fail
    assert build_llama_wheel.main([]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(wheel) and "cached wheel (backend cpu), no build" in err


def test_install_mode_force_reinstalls_the_wheel_into_this_interpreter(cache_home, tmp_path, monkeypatch):
    fake_build(monkeypatch, tmp_path, WRITING_BUILD)
    commands = []
    monkeypatch.setattr(
        build_llama_wheel.subprocess,
        "run",
        lambda cmd, **kwargs: commands.append(cmd) or subprocess.CompletedProcess(cmd, 0),
    )
    lib_dir = tmp_path / "site-packages" / "llama_cpp" / "lib"
    lib_dir.mkdir(parents=True)
    monkeypatch.setattr(build_llama_wheel, "installed_lib_dir", lambda: lib_dir)
    assert build_llama_wheel.main(["--install", "--gpu", "cuda"]) == 0
    [command] = commands
    assert command[:5] == [sys.executable, "-P", "-m", "pip", "install"]  # -P: nothing imported from the cwd
    assert {"--force-reinstall", "--no-deps"} <= set(command)
    assert Path(command[-1]).parent.name == build_llama_wheel.wheel_key("-DGGML_CUDA=on")
    assert (lib_dir / build_llama_wheel.RPC_SERVER).read_bytes() == b"rpc"  # the worker, beside the libraries


def test_the_rpc_worker_compiles_against_the_wheels_own_ggml(tmp_path):
    cmd = build_llama_wheel.rpc_server_command(tmp_path / "src", tmp_path / "libs", tmp_path / "out")
    assert str(tmp_path / "src" / "vendor" / "llama.cpp" / "tools" / "rpc" / "rpc-server.cpp") in cmd
    assert (
        cmd[cmd.index("-L") + 1] == str(tmp_path / "libs") and "-lggml" in cmd and "-Wl,-rpath,$ORIGIN" in cmd
    )


# --- install_torch -----------------------------------------------------------------------------------


def test_the_torch_version_is_the_one_pyproject_pins():
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"torch=={install_torch.TORCH_VERSION}" in dependencies


@pytest.mark.parametrize(
    ("gpu", "platform", "requirement", "fallback"),
    [
        ("cpu", "linux", "torch==2.13.0+cpu", install_torch.CPU_INDEX_URL),
        ("cpu", "win32", "torch==2.13.0+cpu", install_torch.CPU_INDEX_URL),
        ("cpu", "darwin", "torch==2.13.0", None),
        ("cuda", "linux", "torch==2.13.0,!=2.13.0+cpu", None),  # a find-links +cpu wheel must not win
    ],
)
def test_the_torch_plan_per_gpu_and_platform(gpu, platform, requirement, fallback):
    plan = install_torch.plan_for(gpu, platform, environ={})
    assert (plan.requirement, plan.fallback_index, plan.first_index) == (requirement, fallback, None)


def test_cuda_torch_can_come_from_another_index():
    plan = install_torch.plan_for("cuda", "linux", environ={"TORCH_INDEX_URL": "https://example/cu128"})
    assert plan.first_index == "https://example/cu128" and "several GB" in plan.why
    assert install_torch.pip_install_command(plan.requirement, plan.first_index)[-2:] == [
        "--extra-index-url",
        "https://example/cu128",
    ]


@pytest.mark.parametrize(
    ("gpu", "installed", "right"),
    [
        ("cpu", "2.13.0+cpu", True),
        ("cpu", "2.13.0", False),  # PyPI's Linux wheel: the CUDA build
        ("cpu", "2.12.0+cpu", False),
        ("cpu", None, False),
        ("cuda", "2.13.0", True),
        ("cuda", "2.13.0+cu128", True),
        ("cuda", "2.13.0+cpu", False),
    ],
)
def test_the_installed_flavour_is_recognised(gpu, installed, right):
    assert (
        install_torch.is_right_flavour(install_torch.plan_for(gpu, "linux", environ={}), installed) is right
    )


@pytest.mark.parametrize(
    ("first_output", "retried"),
    [
        ("ERROR: No matching distribution found for torch==2.13.0+cpu", True),
        ("ERROR: HTTP error 503", False),
    ],
)
def test_the_cpu_index_is_tried_only_when_the_configured_sources_have_no_match(
    monkeypatch, first_output, retried
):
    commands = []
    monkeypatch.setattr(
        install_torch,
        "run_streamed",
        lambda cmd: commands.append(cmd) or ((1, first_output) if len(commands) == 1 else (0, "")),
    )
    status = install_torch.install(install_torch.plan_for("cpu", "linux", environ={}))
    assert "--extra-index-url" not in commands[0]
    assert len(commands) == (2 if retried else 1) and status == (0 if retried else 1)
    if retried:
        assert commands[1][-2:] == ["--extra-index-url", install_torch.CPU_INDEX_URL]


def test_the_right_torch_is_not_reinstalled(monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(install_torch, "installed_torch_version", lambda: "2.13.0+cpu")
    monkeypatch.setattr(install_torch, "install", lambda plan: pytest.fail("reinstalled"))
    monkeypatch.setattr(install_torch, "report_installed", lambda plan: 0)
    assert install_torch.main(["--gpu", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "== torch: CPU build (GPU=cuda for the CUDA build)" in out and "already installed" in out


def test_the_other_flavour_is_uninstalled_first(monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(install_torch, "installed_torch_version", lambda: "2.13.0")
    calls = []
    monkeypatch.setattr(
        install_torch.subprocess,
        "run",
        lambda cmd, **kwargs: calls.append(cmd) or subprocess.CompletedProcess(cmd, 0),
    )
    monkeypatch.setattr(install_torch, "install", lambda plan: calls.append(plan.requirement) or 0)
    monkeypatch.setattr(install_torch, "report_installed", lambda plan: 0)
    assert install_torch.main(["--gpu", "cpu"]) == 0
    assert calls[0][-4:] == ["uninstall", "-y", "-q", "torch"] and calls[1] == "torch==2.13.0+cpu"
    assert "replacing it" in capsys.readouterr().out


def test_a_cpu_torch_under_gpu_cuda_is_called_out():
    plan = install_torch.plan_for("cuda", "linux", environ={})
    [warning] = install_torch.flavour_warnings(plan, cuda_build=False, cuda_available=False)
    assert "CPU build" in warning and "TORCH_INDEX_URL" in warning
    assert install_torch.flavour_warnings(plan, cuda_build=True, cuda_available=True) == []


# --- preflight ---------------------------------------------------------------------------------------


@pytest.fixture
def all_tools_found(monkeypatch):
    monkeypatch.delenv(preflight.PRETEND_ENV, raising=False)
    monkeypatch.setattr(preflight.shutil, "which", lambda name: f"/usr/bin/{name}")


def by_name(results):
    return {result.name: result for result in results}


@pytest.mark.parametrize(
    ("version", "status"), [((3, 10, 12), "missing"), ((3, 11, 0), "ok"), ((3, 13, 1), "ok")]
)
def test_the_python_version_check(version, status):
    result = preflight.check_python(version)
    assert result.status == status
    if status == "missing":
        assert "3.11 or newer" in result.detail and result.apt == "python3"


def test_pretended_missing_tools_are_named_with_their_package(all_tools_found, monkeypatch):
    monkeypatch.setenv(preflight.PRETEND_ENV, "patch,cc")
    results = by_name(preflight.check_build_tools("cpu", wheel_cached=False))
    assert results["patch"].status == "missing" and results["patch"].fix == "sudo apt install patch"
    assert results["C compiler"].status == "missing" and results["C compiler"].apt == "build-essential"
    assert results["C++ compiler"].status == "ok" and results["cmake"].status == "ok"
    assert "nvcc (CUDA toolkit, for GPU=cuda)" not in results


def test_build_tools_are_not_needed_while_the_wheel_is_cached(all_tools_found, monkeypatch):
    monkeypatch.setenv(preflight.PRETEND_ENV, "patch,cc,c++,cmake,nvcc")
    results = preflight.check_build_tools("cuda", wheel_cached=True)
    assert len(results) == 5 and all(
        result.status == "ok" and "not needed" in result.detail for result in results
    )


def test_a_missing_cmake_is_a_warning_and_nvcc_is_required_for_cuda(all_tools_found, monkeypatch):
    monkeypatch.setenv(preflight.PRETEND_ENV, "cmake,nvcc")
    results = by_name(preflight.check_build_tools("cuda", wheel_cached=False))
    assert results["cmake"].status == "warning" and "PyPI" in results["cmake"].detail
    assert results["nvcc (CUDA toolkit, for GPU=cuda)"].status == "missing"


def test_a_missing_venv_module_names_python3_venv(tmp_path, monkeypatch):
    monkeypatch.setenv(preflight.PRETEND_ENV, "venv")
    result = preflight.check_venv_support(tmp_path / "no-venv")
    assert result.status == "missing" and result.fix == "sudo apt install python3-venv"
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").touch()
    assert preflight.check_venv_support(tmp_path / "venv").status == "ok"


def test_a_missing_xcb_cursor_library_is_only_a_warning(monkeypatch):
    monkeypatch.setenv(preflight.PRETEND_ENV, "xcb-cursor")
    result = preflight.check_xcb_cursor()
    assert result.status == "warning" and result.fix == "sudo apt install libxcb-cursor0"


def test_disk_needs_count_only_what_is_not_in_place(tmp_path):
    cache = tmp_path / "specprefill"
    needs = preflight.disk_needs("cpu", tmp_path / "venv", cache, wheel_cached=False)
    assert [need.what for need in needs] == [
        ".venv",
        "pip's download cache",
        "models",
        "draft cache",
        "llama.cpp build (temporary)",
    ]
    (tmp_path / "venv").mkdir()
    (cache / "models").mkdir(parents=True)
    (cache / "models" / "target.gguf").touch()
    (cache / "draft" / "model").mkdir(parents=True)
    assert preflight.disk_needs("cpu", tmp_path / "venv", cache, wheel_cached=True) == []
    [cuda] = preflight.disk_needs("cuda", tmp_path / "venv", cache, wheel_cached=True)
    assert cuda.gb == pytest.approx(preflight.VENV_GB["cuda"] - preflight.VENV_GB["cpu"])


def test_the_disk_check_compares_free_space_with_what_setup_writes(tmp_path, monkeypatch):
    needs = preflight.disk_needs("cpu", tmp_path / "venv", tmp_path / "specprefill", wheel_cached=False)
    monkeypatch.setattr(preflight, "free_gb", lambda path: 3.0)
    [short] = preflight.check_disk(needs, tmp_path)
    assert short.status == "missing" and "3.0 GB free" in short.detail and "about 7.0 GB" in short.detail
    for name in ("MODELS_GB", "DRAFT_GB", "PIP_CACHE_GB", "LLAMA_BUILD_GB"):
        monkeypatch.setattr(preflight, name, 0.001)
    monkeypatch.setitem(preflight.VENV_GB, "cpu", 0.001)
    needs = preflight.disk_needs("cpu", tmp_path / "venv", tmp_path / "specprefill", wheel_cached=False)
    assert [result.status for result in preflight.check_disk(needs, tmp_path)] == ["ok"]


def test_the_exit_code_and_summary(cache_home, all_tools_found, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(preflight, "free_gb", lambda path: 1000.0)
    assert preflight.main(["--venv", str(tmp_path / "venv")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("preflight: ready for make setup")
    monkeypatch.setenv(preflight.PRETEND_ENV, "patch,cc,c++")
    assert preflight.main(["--venv", str(tmp_path / "venv")]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "preflight: 3 required missing: C compiler, C++ compiler, patch. Fix: sudo apt install build-essential patch"
    )


def test_other_platforms_get_their_own_line(cache_home, all_tools_found, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(preflight, "free_gb", lambda path: 1000.0)
    monkeypatch.setenv(preflight.PRETEND_ENV, "patch")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert preflight.main(["--venv", str(tmp_path / "venv")]) == 1
    out = capsys.readouterr().out
    assert "xcode-select --install" in out and "brew install cmake" in out and "apt install" not in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the PATH simulation uses Linux paths")
def test_a_path_without_the_tools_fails_the_real_script(tmp_path):
    env = {
        "PATH": str(tmp_path / "empty-bin"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HOME": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, str(REPO / "packaging" / "preflight.py"), "--venv", str(tmp_path / "v")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "missing  patch: not found" in result.stdout and "sudo apt install patch" in result.stdout
    assert "missing  C compiler" in result.stdout


# --- Makefile ----------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_passes_the_gpu_choice_to_every_setup_step():
    result = subprocess.run(
        ["make", "-n", "-B", "setup", "dist", "GPU=cuda"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    for step in (
        "packaging/preflight.py --gpu cuda",
        "packaging/install_torch.py --gpu cuda",
        "packaging/build_llama_wheel.py --gpu cuda --install",
        "touch .venv/.specprefill-installed-cuda",
        "packaging/build_dist.py",
    ):
        assert step in result.stdout
    bad = subprocess.run(
        ["make", "-n", "setup", "GPU=rocm"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0 and "use GPU=cpu" in bad.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_runs_every_test_in_one_of_its_two_passes():
    """The tiny-fixture pass on both cores and the real-model pass one at a time: complementary marks."""
    result = subprocess.run(["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    passes = re.findall(r'-m pytest [^\n]*-m "([^"]+)"', result.stdout)
    assert passes == ["not real_models and not bundle", "real_models or bundle"]
    assert "-n 2" in result.stdout.split(passes[0])[0].splitlines()[-1]
