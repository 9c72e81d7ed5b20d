"""Build (once) and cache the llama-cpp-python wheel with the gapped-positions patch.

The wheel is keyed by version, patch hash and CPU flags (ggml builds with
-march=native), so setup and CI reuse it instead of a 10-minute rebuild.
Stdlib only: this runs before the project's dependencies are installed.

Usage: python packaging/build_llama_wheel.py [--print-path]
Prints the path of the cached wheel on its last line.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LLAMA_VERSION = "0.3.36"
PATCH_FILE = Path(__file__).with_name("llama-cpp-gapped-positions.patch")
CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specprefill" / "wheels"


def cpu_flags_digest() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return hashlib.sha256(flags.encode()).hexdigest()[:8]


def wheel_key() -> str:
    patch_digest = hashlib.sha256(PATCH_FILE.read_bytes() + CMAKE_ARGS.encode()).hexdigest()[:12]
    return f"llama_cpp_python-{LLAMA_VERSION}-patch-{patch_digest}-cpu-{cpu_flags_digest()}"


def cached_wheel(key_dir: Path) -> Path | None:
    wheels = sorted(key_dir.glob("llama_cpp_python-*.whl"))
    return wheels[0] if wheels else None


def run(cmd: list[str], **kwargs) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def download_sdist(dest: Path) -> Path:
    run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         f"llama-cpp-python=={LLAMA_VERSION}", "-d", str(dest)])
    return next(dest.glob("llama_cpp_python-*.tar.gz"))


def unpack_and_patch(sdist: Path, work: Path) -> Path:
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    src = next(p for p in work.iterdir() if p.is_dir())
    run(["patch", "-p1", "--forward", "-i", str(PATCH_FILE.resolve())], cwd=src)
    return src


def build_wheel(src: Path, out_dir: Path) -> Path:
    env = dict(os.environ, CMAKE_ARGS=CMAKE_ARGS, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 2))
    partial = out_dir.with_name(out_dir.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(partial), str(src)], env=env)
    partial.rename(out_dir)  # atomic: a half-built wheel is never picked up
    return cached_wheel(out_dir)


def ensure_wheel() -> Path:
    key_dir = cache_root() / wheel_key()
    found = cached_wheel(key_dir) if key_dir.is_dir() else None
    if found:
        return found
    with tempfile.TemporaryDirectory(prefix="llama-build-") as tmp:
        tmp_path = Path(tmp)
        sdist = download_sdist(tmp_path / "sdist")
        src = unpack_and_patch(sdist, tmp_path / "src")
        return build_wheel(src, key_dir)


if __name__ == "__main__":
    print(ensure_wheel())
