"""Which of llama.cpp's CPU libraries this process loads, and whether weight repacking is on.

The wheel is built with GGML_BACKEND_DL: one `libggml-cpu-<variant>.so` per micro-architecture
(packaging/build_llama_wheel.py). We load the best variant this CPU supports, by absolute path
(never llama.cpp's own search, which also looks in the current directory). ggml's AMX code
segfaults with Q4_K weights on some Xeons (llama.cpp #20824), so an AMX variant's extra buffer
types are used only after a self-test in a child process passed on this machine; the verdict is
cached per build, CPU and variant. See the README, "Supported CPUs".

Overrides: SPECPREFILL_CPU_VARIANT=<name> loads that variant; SPECPREFILL_EXTRA_BUFTS=0 turns
the extra buffer types (weight repacking) off.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.core.children import child_env, owned_cwd, python_command
from engine.core.cpu import cpu_identity
from engine.core.verdicts import read_verdicts, write_verdict
from engine.llama.ggml_lib import ggml, lib_dir  # noqa: F401  (lib_dir: callers find the variants there)

log = logging.getLogger(__name__)

VARIANT_ENV = "SPECPREFILL_CPU_VARIANT"
EXTRA_BUFTS_ENV = "SPECPREFILL_EXTRA_BUFTS"
AMX_VARIANTS = ("sapphirerapids",)
SELFTEST_TIMEOUT_S = 180
_VARIANT_RE = re.compile(r"^libggml-cpu-(?P<name>[A-Za-z0-9_.]+)\.so$")
_OTHER_BACKENDS = ("libggml-rpc.so", "libggml-cuda.so", "libggml-vulkan.so", "libggml-hip.so")


@dataclass(frozen=True)
class CpuPath:
    """What this process runs llama.cpp's CPU work on; doctor and results report it."""

    variant: str  # e.g. "skylakex"; "builtin" for a wheel without loadable variants
    extra_bufts: bool  # weight repacking into extra buffer types (AMX, CPU repack)
    verdict: str  # the self-test's word: "passed", "failed: …", "not needed", "forced: …"
    tested_at: str = ""  # the self-test's date, ISO 8601, where one ran

    def summary(self) -> str:
        extra = "on" if self.extra_bufts else "off"
        when = f" ({self.tested_at})" if self.tested_at else ""
        return f"cpu variant: {self.variant}, extra buffer types: {extra}, self-test: {self.verdict}{when}"


def variant_libraries(directory: Path) -> dict[str, Path]:
    """The CPU variants the wheel holds: name -> library."""
    found = {}
    for path in sorted(directory.glob("libggml-cpu-*.so")):
        match = _VARIANT_RE.match(path.name)
        if match:
            found[match["name"]] = path
    return found


def variant_score(path: Path) -> int:
    """ggml's own score for a variant on this CPU (0: this CPU lacks one of its instructions)."""
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        score = lib.ggml_backend_score
    except (OSError, AttributeError):
        return 0
    score.restype = ctypes.c_int
    return int(score())


def ranked_variants(libraries: dict[str, Path]) -> list[str]:
    """The variants (of variant_libraries) this CPU runs, best first."""
    scored = [(variant_score(path), name) for name, path in libraries.items()]
    return [name for score, name in sorted(scored, reverse=True) if score > 0]


def build_identity(path: Path) -> str:
    stat = path.stat()
    return hashlib.sha256(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]


def verdict_path() -> Path:
    from engine.core.paths import cache_dir

    return cache_dir() / "cpu-selftest.json"


def run_selftest(library: Path, model: Path) -> tuple[bool, str]:
    """Decode a short batch with this variant and extra buffer types on, in a child process.

    The child runs with -P (no import from the current directory) in a folder we own; a signal,
    a time-out or a wrong answer (different from the same decode with extra buffers off) fails.
    """
    cmd = python_command("-m", "engine.llama.cpu_selftest", "--library", str(library), "--model", str(model))
    with owned_cwd("specprefill-selftest-") as cwd:
        try:
            proc = subprocess.run(
                cmd, cwd=cwd, capture_output=True, text=True, timeout=SELFTEST_TIMEOUT_S, env=child_env()
            )
        except subprocess.TimeoutExpired:
            return False, f"failed: no answer in {SELFTEST_TIMEOUT_S} s"
    if proc.returncode < 0:
        import signal

        return False, f"failed: the child died of {signal.Signals(-proc.returncode).name}"
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    try:
        answer = json.loads(last)
    except ValueError:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"failed: exit {proc.returncode} ({tail[:160]})"
    if not answer.get("same"):
        return False, "failed: a different answer with extra buffer types on"
    return True, "passed"


def tested_verdict(name: str, library: Path, model: Path | None) -> tuple[bool, str, str]:
    """(passed, verdict, date) for an AMX variant, from the cache or a new self-test."""
    key = f"{build_identity(library)}|{cpu_identity()}|{name}"
    cached = read_verdicts(verdict_path()).get(key)
    if cached:
        return bool(cached["passed"]), cached["verdict"], cached["tested_at"]
    if model is None:
        return False, "not run (no model to test with yet): extra buffer types off", ""
    log.info("self-test of the %s CPU variant with extra buffer types (once per build and CPU)", name)
    passed, verdict = run_selftest(library, model)
    tested_at = time.strftime("%Y-%m-%d")
    write_verdict(verdict_path(), key, {"passed": passed, "verdict": verdict, "tested_at": tested_at})
    return passed, verdict, tested_at


def extra_bufts_forced_off() -> bool:
    return os.environ.get(EXTRA_BUFTS_ENV, "").strip().lower() in ("0", "off", "false", "no")


def choose_cpu_path(directory: Path, model: Path | None) -> tuple[CpuPath, Path | None]:
    """The variant to load and whether extra buffer types are on; (path, None) for a wheel
    without loadable variants (an older, non-DL build)."""
    libraries = variant_libraries(directory)
    if not libraries:
        return CpuPath("builtin", not extra_bufts_forced_off(), "not needed"), None
    forced = os.environ.get(VARIANT_ENV, "").strip()
    if forced:
        if forced not in libraries:
            raise RuntimeError(f"{VARIANT_ENV}={forced}: this build has {', '.join(sorted(libraries))}")
        return CpuPath(forced, not extra_bufts_forced_off(), f"forced: {VARIANT_ENV}"), libraries[forced]
    ranked = ranked_variants(libraries)
    if not ranked:
        raise RuntimeError(
            f"none of llama.cpp's CPU variants runs on this CPU ({', '.join(sorted(libraries))})"
        )
    best = ranked[0]
    if extra_bufts_forced_off():
        return CpuPath(best, False, f"forced: {EXTRA_BUFTS_ENV}=0"), libraries[best]
    if best not in AMX_VARIANTS:
        return CpuPath(best, True, "not needed"), libraries[best]
    passed, verdict, when = tested_verdict(best, libraries[best], model)
    if passed:
        return CpuPath(best, True, verdict, when), libraries[best]
    # The AMX variant without its AMX buffers still runs AVX-512 VNNI/BF16 kernels.
    return CpuPath(best, False, verdict, when), libraries[best]


def load_backends(cpu_library: Path | None, directory: Path) -> None:
    """Register the chosen CPU variant and the wheel's other backends, each by absolute path."""
    lib = ggml()
    for path in ([cpu_library] if cpu_library else []) + [directory / name for name in _OTHER_BACKENDS]:
        if path.is_file() and not lib.ggml_backend_load(str(path).encode()):
            log.warning("llama.cpp could not load %s", path.name)


def as_record(path: CpuPath) -> dict:
    return asdict(path)
