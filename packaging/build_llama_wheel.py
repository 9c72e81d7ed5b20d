"""Build (once) and cache the llama-cpp-python wheel with the gapped-positions patch.

The wheel is portable: ggml is built with GGML_BACKEND_DL and one CPU library per
micro-architecture (libggml-cpu-<variant>.so), and the app loads the best one this CPU runs
(engine/llama/cpu_backend.py). So the wheel is keyed by version, patch hash and backend only,
never by the host's CPU, and setup and CI reuse it instead of a rebuild of minutes.
See the README, "Supported CPUs", for the variants and why these four.
Stdlib only: this runs before the project's dependencies are installed.

Usage: python packaging/build_llama_wheel.py [--gpu cpu|cuda] [--install | --print-path]

  --gpu cuda    adds -DGGML_CUDA=on (needs nvcc, the CUDA toolkit)
  --install     pip-installs the wheel into this interpreter's environment
  --print-path  (the default) prints the wheel's path on the last line of stdout

The user's $CMAKE_ARGS are appended after ours (never replacing them), e.g.
CMAKE_ARGS="-DGGML_VULKAN=on". Progress and the build's own output go to stderr and to
a log next to the cached wheels; stdout carries only the wheel's path.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path
from typing import TextIO

LLAMA_VERSION = "0.3.36"
PATCH_FILE = Path(__file__).with_name("llama-cpp-gapped-positions.patch")
# Ours: always passed first, whatever the user adds.
CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DGGML_RPC=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"
# Never -march=native: one CPU library per variant, chosen at run time.
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON"
# The smallest x86-64 set that covers the baseline, AVX2, AVX-512 and AVX-512 + AMX (the
# patch's GGML_CPU_VARIANT_ONLY); other architectures build all of llama.cpp's own variants.
X86_CPU_VARIANTS = ("x64", "haswell", "skylakex", "sapphirerapids")
GPU_CMAKE_ARGS = {"cpu": "", "cuda": "-DGGML_CUDA=on"}
# First match names the backend in the cache key; HIPBLAS is the older name of HIP.
BACKEND_FLAGS = (
    ("cuda", "GGML_CUDA"),
    ("metal", "GGML_METAL"),
    ("vulkan", "GGML_VULKAN"),
    ("hip", "GGML_HIP"),
    ("hip", "GGML_HIPBLAS"),
)
BUILD_MINUTES_ON_2_CORES = "3 to 10"  # 4 min 05 s measured on a quiet 2-core machine (four CPU variants)
FAILURE_TAIL_LINES = 40

DOWNLOAD_HINT = (
    "pip could not fetch the llama-cpp-python sdist: check the network and your pip index (pip config list)."
)
PATCH_HINT = (
    "`patch` applies the gapped-positions patch (Debian/Ubuntu: sudo apt install patch); "
    "if it ran, the patch no longer applies to this sdist."
)
RPC_SERVER = "ggml-rpc-server"  # llama.cpp's RPC worker (tools/rpc): `specprefill worker` starts it
RPC_SERVER_HINT = (
    "the RPC worker (tools/rpc/rpc-server.cpp) did not compile against the wheel's ggml: "
    "look above for the first 'error' (a C++17 compiler is needed)"
)
BUILD_HINT = (
    "look above for the first 'error'. Usual causes: no C/C++ compiler (sudo apt install build-essential), "
    "cmake (sudo apt install cmake), no disk space in the temporary dir (df -h ${TMPDIR:-/tmp}), "
    "or a GPU backend's toolkit (nvcc for -DGGML_CUDA=on). Check with: python3 packaging/preflight.py"
)


class StepFailed(Exception):
    """A build step exited non-zero; `hint` says what usually causes it."""

    def __init__(self, what: str, hint: str):
        super().__init__(what)
        self.hint = hint


def say(message: str, log: TextIO | None = None) -> None:
    print(message, file=sys.stderr, flush=True)
    if log is not None:
        log.write(message + "\n")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specprefill" / "wheels"


def is_x86_64(machine: str | None = None) -> bool:
    return (machine or platform.machine()).lower() in ("x86_64", "amd64")


def our_cmake_args(machine: str | None = None) -> str:
    """Ours, before the user's: the portable CPU build, with the x86-64 variant set there."""
    variants = f" -DGGML_CPU_VARIANT_ONLY={','.join(X86_CPU_VARIANTS)}" if is_x86_64(machine) else ""
    return f"{CMAKE_ARGS} {PORTABLE_CMAKE_ARGS}{variants}"


def short_digest(data: bytes, length: int) -> str:
    return hashlib.sha256(data).hexdigest()[:length]


def extra_cmake_args(gpu: str = "cpu", user_args: str | None = None) -> str:
    """What goes after our CMAKE_ARGS: the GPU choice's flags, then the user's $CMAKE_ARGS."""
    if user_args is None:
        user_args = os.environ.get("CMAKE_ARGS", "")
    return " ".join(f"{GPU_CMAKE_ARGS[gpu]} {user_args}".split())


def backend_of(extra_args: str) -> str:
    for backend, flag in BACKEND_FLAGS:
        if re.search(rf"-D{flag}(:BOOL)?=(on|1|true|yes)(\s|$)", extra_args, re.IGNORECASE):
            return backend
    return "cpu"


def wheel_key(extra_args: str = "") -> str:
    """The cache folder's name: version, patch and our CMake args, the backend's args, the arch."""
    patch_digest = short_digest(PATCH_FILE.read_bytes() + our_cmake_args().encode(), 12)
    backend = f"-{backend_of(extra_args)}-{short_digest(extra_args.encode(), 8)}" if extra_args else ""
    # No host CPU in the key: the wheel holds every variant and serves any CPU of its arch.
    return f"llama_cpp_python-{LLAMA_VERSION}-patch-{patch_digest}{backend}-{platform.machine().lower()}"


def build_log_path(key: str) -> Path:
    return cache_root() / f"build-{key}.log"


def cached_wheel(key_dir: Path) -> Path | None:
    wheels = sorted(key_dir.glob("llama_cpp_python-*.whl")) if key_dir.is_dir() else []
    return wheels[0] if wheels else None


def command_name(cmd: list[str]) -> str:
    # "python -m pip wheel ..." reads better as "pip wheel".
    return " ".join(cmd[2:4]) if cmd[1:3] == ["-m", "pip"] else Path(cmd[0]).name


def run_logged(cmd: list[str], log: TextIO, hint: str, **popen_kwargs) -> None:
    """Stream the command's output line by line to the terminal and the log; raise StepFailed on failure."""
    say("+ " + shlex.join(cmd), log)
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", **popen_kwargs
        )
    except FileNotFoundError:
        say(f"{cmd[0]}: command not found", log)
        raise StepFailed(f"{cmd[0]} not found", hint) from None
    with proc:
        for line in proc.stdout:
            sys.stderr.write(line)
            log.write(line)
    if proc.returncode:
        raise StepFailed(f"{command_name(cmd)} exited with status {proc.returncode}", hint)


def download_sdist(dest: Path, log: TextIO) -> Path:
    run_logged(
        [
            sys.executable,
            "-P",
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"llama-cpp-python=={LLAMA_VERSION}",
            "-d",
            str(dest),
        ],
        log,
        DOWNLOAD_HINT,
    )
    return next(dest.glob("llama_cpp_python-*.tar.gz"))


def unpack_and_patch(sdist: Path, work: Path, log: TextIO) -> Path:
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    src = next(p for p in work.iterdir() if p.is_dir())
    run_logged(["patch", "-p1", "--forward", "-i", str(PATCH_FILE.resolve())], log, PATCH_HINT, cwd=src)
    return src


def wheel_command(src: Path, out_dir: Path) -> list[str]:
    # -v: pip shows the cmake/compiler output instead of a silent wait of minutes.
    return [sys.executable, "-P", "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out_dir), str(src)]


def build_env(extra_args: str) -> dict[str, str]:
    cmake_args = f"{our_cmake_args()} {extra_args}".strip()
    return dict(os.environ, CMAKE_ARGS=cmake_args, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))


def unpack_wheel_libs(wheel: Path, dest: Path) -> Path:
    """The wheel's native libraries (llama_cpp/lib/*.so*), unpacked to link the RPC worker against."""
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("llama_cpp/lib/"):
                zf.extract(name, dest)
    return dest / "llama_cpp" / "lib"


def rpc_server_command(src: Path, lib_dir: Path, out: Path) -> list[str]:
    # $ORIGIN: installed beside the wheel's libraries (install_rpc_server), it finds them there.
    ggml = src / "vendor" / "llama.cpp"
    return [
        os.environ.get("CXX", "c++"),
        "-std=c++17",
        "-O2",
        "-I",
        str(ggml / "ggml" / "include"),
        str(ggml / "tools" / "rpc" / "rpc-server.cpp"),
        "-L",
        str(lib_dir),
        "-lggml",
        "-lggml-base",
        "-Wl,-rpath,$ORIGIN",
        "-o",
        str(out),
    ]


def build_rpc_server(src: Path, wheel: Path, out_dir: Path, log: TextIO) -> Path:
    """Compile llama.cpp's RPC worker against this wheel's own ggml, so worker and client always
    speak the same protocol version. One source file: seconds, not a second ggml build."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llama-libs-") as tmp:
        out = out_dir / RPC_SERVER
        run_logged(rpc_server_command(src, unpack_wheel_libs(wheel, Path(tmp)), out), log, RPC_SERVER_HINT)
    say(
        f"== llama.cpp: {RPC_SERVER} built in {time.monotonic() - started:.0f} s "
        f"({out.stat().st_size / 1e6:.1f} MB)",
        log,
    )
    return out


def build_wheel(src: Path, out_dir: Path, extra_args: str, log: TextIO) -> Path:
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # a failed build's leftovers are never picked up
    partial.mkdir(parents=True)
    try:
        run_logged(wheel_command(src, partial), log, BUILD_HINT, env=build_env(extra_args))
        build_rpc_server(src, cached_wheel(partial), partial, log)
        shutil.rmtree(out_dir, ignore_errors=True)  # an empty key folder would block the rename
        partial.rename(out_dir)  # atomic: a half-built wheel is never picked up
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return cached_wheel(out_dir)


def announce_build(extra_args: str, log_path: Path, log: TextIO) -> None:
    say(
        f"== llama.cpp: building patched llama-cpp-python {LLAMA_VERSION} "
        f"(backend {backend_of(extra_args)}, CMAKE_ARGS: {our_cmake_args()} {extra_args}".rstrip()
        + ")",
        log,
    )
    say(
        f"   about {BUILD_MINUTES_ON_2_CORES} minutes on 2 cores (this machine has {os.cpu_count()}); "
        "built once, then cached",
        log,
    )
    say(f"   full output: {log_path}", log)


def build_from_sdist(key_dir: Path, extra_args: str, log: TextIO) -> Path:
    with tempfile.TemporaryDirectory(prefix="llama-build-") as tmp:
        tmp_path = Path(tmp)
        sdist = download_sdist(tmp_path / "sdist", log)
        src = unpack_and_patch(sdist, tmp_path / "src", log)
        return build_wheel(src, key_dir, extra_args, log)


def ensure_wheel(extra_args: str = "") -> Path:
    """The cached wheel for these args, built first if need be. Raises StepFailed (the log keeps the output)."""
    key = wheel_key(extra_args)
    key_dir = cache_root() / key
    found = cached_wheel(key_dir)
    if found:
        say(f"== llama.cpp: cached wheel (backend {backend_of(extra_args)}), no build: {found}")
        return found
    log_path = build_log_path(key)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with log_path.open("w", buffering=1) as log:
        announce_build(extra_args, log_path, log)
        wheel = build_from_sdist(key_dir, extra_args, log)
        minutes, seconds = divmod(int(time.monotonic() - started), 60)
        say(f"== llama.cpp: built in {minutes}m {seconds:02d}s: {wheel}", log)
    return wheel


def log_tail(log_path: Path, lines: int = FAILURE_TAIL_LINES) -> list[str]:
    with log_path.open(errors="replace") as log:
        return list(collections.deque(log, maxlen=lines))


def report_failure(failure: StepFailed, log_path: Path) -> None:
    tail = log_tail(log_path) if log_path.is_file() else []
    say("")
    say(f"== llama.cpp: build FAILED ({failure})")
    say(f"---- last {len(tail)} lines of {log_path} ----")
    sys.stderr.write("".join(tail))
    say("---- end of the log's tail ----")
    say(f"full log: {log_path}")
    say(f"hint: {failure.hint}")


def install_wheel(wheel: Path) -> int:
    say(f"== llama.cpp: installing {wheel.name} into {sys.prefix}")
    rc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--force-reinstall",
            "--no-deps",
            str(wheel),
        ]
    ).returncode
    return rc or install_rpc_server(wheel.parent / RPC_SERVER)


def installed_lib_dir() -> Path:
    """Where the installed wheel keeps its native libraries in this interpreter's environment."""
    return Path(sysconfig.get_path("platlib")) / "llama_cpp" / "lib"


def install_rpc_server(server: Path) -> int:
    """Put the RPC worker beside the installed wheel's libraries, where the app looks for it."""
    lib_dir = installed_lib_dir()
    if not server.is_file():
        say(
            f"== llama.cpp: no {RPC_SERVER} beside the cached wheel ({server.parent}); "
            "`specprefill worker` will not run until the wheel is rebuilt"
        )
        return 0
    shutil.copy2(server, lib_dir / RPC_SERVER)
    say(f"== llama.cpp: {RPC_SERVER} installed in {lib_dir}")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--gpu", choices=sorted(GPU_CMAKE_ARGS), default="cpu", help="cuda adds -DGGML_CUDA=on (default: cpu)"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--install", action="store_true", help="pip-install the wheel into this environment")
    mode.add_argument("--print-path", action="store_true", help="print the wheel's path (the default)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    extra = extra_cmake_args(args.gpu)
    try:
        wheel = ensure_wheel(extra)
    except StepFailed as failure:
        report_failure(failure, build_log_path(wheel_key(extra)))
        return 1
    if args.install:
        return install_wheel(wheel)
    print(wheel, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
