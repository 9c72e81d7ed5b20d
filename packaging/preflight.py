"""Check what `make setup` needs before it starts, and name the package that provides what is missing.

Usage: python3 packaging/preflight.py [--gpu cpu|cuda] [--venv .venv]

One line per check (ok / missing / warning, with the fix), then a summary; exit 1 when a
required prerequisite is missing. The compilers, patch and cmake are needed only when the
patched llama.cpp wheel is not cached yet. Stdlib only: this runs before the venv exists.

Tools are looked up on PATH, so `PATH=/some/dir /usr/bin/python3 packaging/preflight.py` shows
what a machine without them sees. SPECPREFILL_PREFLIGHT_PRETEND_MISSING=patch,cc makes the named
checks find nothing (names: venv, cc, c++, patch, cmake, nvcc, xcb-cursor).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_llama_wheel  # noqa: E402  (a sibling script, not a package)

REPO = Path(__file__).resolve().parents[1]
MIN_PYTHON = (3, 11)
PRETEND_ENV = "SPECPREFILL_PREFLIGHT_PRETEND_MISSING"
GB = 1024**3

# What a first setup writes, in GB. Measured with `du -sh` after `make setup` on Linux x86_64
# (CPU torch), except where marked as an estimate.
VENV_GB = {"cpu": 1.6, "cuda": 7.0}  # cuda: estimate, CUDA torch + its nvidia-* wheels (~5.5 GB more)
PIP_CACHE_GB = 0.5  # estimate: pip keeps the downloaded wheels (torch CPU alone is 0.19 GB)
MODELS_GB = 1.5  # the two GGUF models
DRAFT_GB = 2.4  # the draft dequantized to safetensors
# estimate: the temporary llama.cpp build: sdist 74 MB + unpacked 217 MB (measured) + the cmake build
# tree (not measured); the cached wheel is 20 MB.
LLAMA_BUILD_GB = 1.0

XCB_CURSOR_LIB = "libxcb-cursor.so.0"
LIB_DIRS = (
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/local/lib",
    "/usr/lib/*-linux-gnu",
    "/lib/*-linux-gnu",
)

PLATFORM_NEEDS = {
    "darwin": "macOS: install the Xcode Command Line Tools (xcode-select --install) and cmake (brew install cmake); "
    "the Debian/Ubuntu package names below do not apply.",
    "win32": "Windows: install Visual Studio Build Tools with the 'Desktop development with C++' workload, and CMake; "
    "the Debian/Ubuntu package names below do not apply.",
}


@dataclass(frozen=True)
class Result:
    status: str  # "ok" | "missing" | "warning"
    name: str
    detail: str
    fix: str = ""
    apt: str = ""  # the Debian/Ubuntu package, collected into one install line

    def line(self) -> str:
        return f"{self.status:<8} {self.name}: {self.detail}" + (f"  ->  {self.fix}" if self.fix else "")


@dataclass(frozen=True)
class Prerequisite:
    check: str  # its name in the pretend list
    label: str
    apt: str
    other_fix: dict[str, str] = field(default_factory=dict)  # sys.platform -> fix elsewhere

    def fix(self) -> str:
        return self.other_fix.get(sys.platform, f"sudo apt install {self.apt}")


@dataclass(frozen=True)
class Tool(Prerequisite):
    candidates: tuple[str, ...] = ()


XCODE = "xcode-select --install"
VS_BUILD_TOOLS = "Visual Studio Build Tools, C++ workload"
PYTHON = Prerequisite(
    "python",
    "Python",
    "python3",
    {"darwin": "brew install python@3.11", "win32": "python.org's installer, 3.11 or newer"},
)
VENV = Prerequisite("venv", "venv/ensurepip", "python3-venv")
XCB_CURSOR = Prerequisite("xcb-cursor", "Qt's xcb cursor library", "libxcb-cursor0")
C_COMPILER = Tool(
    "cc",
    "C compiler",
    "build-essential",
    {"darwin": XCODE, "win32": VS_BUILD_TOOLS},
    ("cc", "gcc", "clang", "cl"),
)
CXX_COMPILER = Tool(
    "c++",
    "C++ compiler",
    "build-essential",
    {"darwin": XCODE, "win32": VS_BUILD_TOOLS},
    ("c++", "g++", "clang++", "cl"),
)
PATCH = Tool(
    "patch", "patch", "patch", {"darwin": XCODE, "win32": "patch.exe (Git for Windows) on PATH"}, ("patch",)
)
CMAKE = Tool(
    "cmake",
    "cmake",
    "cmake",
    {"darwin": "brew install cmake", "win32": "CMake (cmake.org) on PATH"},
    ("cmake",),
)
NVCC = Tool(
    "nvcc",
    "nvcc (CUDA toolkit, for GPU=cuda)",
    "nvidia-cuda-toolkit",
    {"win32": "NVIDIA's CUDA toolkit"},
    ("nvcc",),
)


def pretend_missing() -> set[str]:
    return {name.strip() for name in os.environ.get(PRETEND_ENV, "").split(",") if name.strip()}


def find_tool(tool: Tool) -> str | None:
    if tool.check in pretend_missing():
        return None
    return next(filter(None, (shutil.which(name) for name in tool.candidates)), None)


def check_python(version: tuple[int, ...] | None = None) -> Result:
    version = tuple(sys.version_info[:3]) if version is None else version
    shown = ".".join(map(str, version))
    if version[:2] >= MIN_PYTHON:
        return Result("ok", PYTHON.label, f"{shown} ({sys.executable})")
    wanted = ".".join(map(str, MIN_PYTHON))
    return Result(
        "missing",
        PYTHON.label,
        f"{shown} is too old, {wanted} or newer is needed",
        f"{PYTHON.fix()} ({wanted}+), then make setup PYTHON=python{wanted}",
        PYTHON.apt,
    )


def check_venv_support(venv_dir: Path) -> Result:
    if (venv_dir / "bin" / "python").exists() or (venv_dir / "Scripts" / "python.exe").exists():
        return Result("ok", VENV.label, f"{venv_dir} exists")
    # Debian/Ubuntu ship ensurepip (which `python3 -m venv` needs) in a separate package.
    found = VENV.check not in pretend_missing() and all(
        importlib.util.find_spec(module) for module in ("venv", "ensurepip")
    )
    if found:
        return Result("ok", VENV.label, "python3 -m venv can create .venv")
    return Result(
        "missing", VENV.label, "python3 -m venv cannot work without ensurepip", VENV.fix(), VENV.apt
    )


def check_build_tool(tool: Tool, wheel_cached: bool, required: bool = True, missing_note: str = "") -> Result:
    path = find_tool(tool)
    if path:
        return Result("ok", tool.label, path)
    if wheel_cached:
        return Result("ok", tool.label, "not found; not needed while the llama.cpp wheel is cached")
    detail = "not found; needed to build the patched llama.cpp wheel" + missing_note
    return Result("missing" if required else "warning", tool.label, detail, tool.fix(), tool.apt)


def check_build_tools(gpu: str, wheel_cached: bool) -> list[Result]:
    results = [check_build_tool(tool, wheel_cached) for tool in (C_COMPILER, CXX_COMPILER, PATCH)]
    # scikit-build-core fetches cmake from PyPI when there is none, so its absence may not matter.
    results.append(
        check_build_tool(
            CMAKE, wheel_cached, required=False, missing_note=" (scikit-build-core can fetch it from PyPI)"
        )
    )
    if gpu == "cuda":
        results.append(check_build_tool(NVCC, wheel_cached))
    return results


def ldconfig_lists(library: str) -> bool:
    ldconfig = shutil.which("ldconfig") or next(
        (path for path in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(path)), None
    )
    if ldconfig is None:
        return False
    try:
        listing = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return library in listing


def find_library(library: str) -> bool:
    if XCB_CURSOR.check in pretend_missing():
        return False
    return ldconfig_lists(library) or any(glob.glob(os.path.join(pattern, library)) for pattern in LIB_DIRS)


def check_xcb_cursor() -> Result:
    if find_library(XCB_CURSOR_LIB):
        return Result("ok", XCB_CURSOR.label, XCB_CURSOR_LIB)
    return Result(
        "warning",
        XCB_CURSOR.label,
        f"{XCB_CURSOR_LIB} not found: the app's window cannot open on X11/XWayland "
        "(tests and QT_QPA_PLATFORM=offscreen do not need it)",
        XCB_CURSOR.fix(),
        XCB_CURSOR.apt,
    )


@dataclass(frozen=True)
class DiskNeed:
    what: str
    path: Path
    gb: float


def has_files(folder: Path, pattern: str = "*") -> bool:
    return folder.is_dir() and any(folder.glob(pattern))


def venv_need_gb(gpu: str, venv_dir: Path) -> float:
    if not venv_dir.exists():
        return VENV_GB[gpu]
    has_cuda_libs = any(glob.glob(str(venv_dir / "lib" / "python3*" / "site-packages" / "nvidia")))
    return VENV_GB["cuda"] - VENV_GB["cpu"] if gpu == "cuda" and not has_cuda_libs else 0.0


def disk_needs(gpu: str, venv_dir: Path, cache_dir: Path, wheel_cached: bool) -> list[DiskNeed]:
    """What setup still has to write, and where: parts already in place need nothing."""
    needs = [DiskNeed(".venv", venv_dir, venv_need_gb(gpu, venv_dir))]
    if not venv_dir.exists():
        pip_cache = Path(os.environ.get("PIP_CACHE_DIR") or cache_dir.parent / "pip")
        needs.append(DiskNeed("pip's download cache", pip_cache, PIP_CACHE_GB))
    if not has_files(cache_dir / "models", "*.gguf"):
        needs.append(DiskNeed("models", cache_dir / "models", MODELS_GB))
    if not has_files(cache_dir / "draft"):
        needs.append(DiskNeed("draft cache", cache_dir / "draft", DRAFT_GB))
    if not wheel_cached:
        needs.append(DiskNeed("llama.cpp build (temporary)", Path(tempfile.gettempdir()), LLAMA_BUILD_GB))
    return [need for need in needs if need.gb > 0]


def existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def free_gb(path: Path) -> float:
    return shutil.disk_usage(existing_ancestor(path)).free / GB


def check_disk(needs: list[DiskNeed], anchor: Path) -> list[Result]:
    if not needs:
        return [
            Result(
                "ok", "disk space", f"everything large is in place; {free_gb(anchor):.1f} GB free at {anchor}"
            )
        ]
    by_filesystem: dict[int, list[DiskNeed]] = {}
    for need in needs:
        by_filesystem.setdefault(existing_ancestor(need.path).stat().st_dev, []).append(need)
    return [check_filesystem(group) for group in by_filesystem.values()]


def check_filesystem(needs: list[DiskNeed]) -> Result:
    where = existing_ancestor(needs[0].path)
    total = sum(need.gb for need in needs)
    parts = ", ".join(f"{need.what} {need.gb:.1f} GB" for need in needs)
    free = free_gb(where)
    detail = f"{free:.1f} GB free on the disk of {where}; setup writes about {total:.1f} GB there ({parts})"
    if free >= total:
        return Result("ok", "disk space", detail)
    return Result(
        "missing",
        "disk space",
        detail,
        f"free {total - free:.1f} GB more (e.g. pip cache purge; old caches under {where})",
    )


def run_checks(gpu: str, venv_dir: Path) -> list[Result]:
    key_dir = build_llama_wheel.cache_root() / build_llama_wheel.wheel_key(
        build_llama_wheel.extra_cmake_args(gpu)
    )
    wheel_cached = build_llama_wheel.cached_wheel(key_dir) is not None
    cache_dir = build_llama_wheel.cache_root().parent
    results = [check_python(), check_venv_support(venv_dir), *check_build_tools(gpu, wheel_cached)]
    if sys.platform.startswith("linux"):
        results.append(check_xcb_cursor())
    return results + check_disk(disk_needs(gpu, venv_dir, cache_dir, wheel_cached), cache_dir)


def summary(results: list[Result]) -> str:
    missing = [result for result in results if result.status == "missing"]
    warnings = sum(result.status == "warning" for result in results)
    if not missing:
        return f"preflight: ready for make setup ({warnings} warning{'s' * (warnings != 1)})"
    line = f"preflight: {len(missing)} required missing: {', '.join(result.name for result in missing)}"
    packages = sorted({result.apt for result in missing if result.apt})
    if packages and sys.platform.startswith("linux"):
        line += f". Fix: sudo apt install {' '.join(packages)}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--venv", type=Path, default=REPO / ".venv")
    args = parser.parse_args(argv)
    print("== preflight: what make setup needs", flush=True)
    if sys.platform in PLATFORM_NEEDS:
        print(PLATFORM_NEEDS[sys.platform])
    results = run_checks(args.gpu, args.venv)
    for result in results:
        print(result.line())
    print(summary(results), flush=True)
    return 1 if any(result.status == "missing" for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
