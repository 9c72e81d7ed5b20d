"""Install torch on purpose: the CPU build unless `--gpu cuda` asks for the CUDA one.

PyPI's default Linux torch wheel is the CUDA build (several GB with its nvidia-* libraries),
so a plain `pip install torch` on a CPU-only machine downloads what it cannot use. Here:

  --gpu cpu   Linux/Windows: torch==VERSION+cpu, from the configured pip sources first, then
              from PyTorch's CPU index. macOS: torch==VERSION (PyPI's wheel is CPU + MPS).
  --gpu cuda  torch==VERSION from PyPI (its Linux wheel is the CUDA build), or from
              $TORCH_INDEX_URL when set (e.g. https://download.pytorch.org/whl/cu128).

It says what it chose and why, skips what is already right, and reports what got installed.
Stdlib only: this runs before the project's dependencies are installed.

Usage: python packaging/install_torch.py [--gpu cpu|cuda] [--dry-run]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

TORCH_VERSION = "2.13.0"  # the one place; tests check pyproject.toml pins the same
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"
CUDA_INDEX_EXAMPLE = "https://download.pytorch.org/whl/cu128"
NO_MATCH = "No matching distribution found"

REPORT_SCRIPT = """
import torch
mps = getattr(torch.backends, "mps", None)
print(f"== torch: imports as {torch.__version__} (CUDA runtime: {torch.version.cuda or 'none'}; "
      f"CUDA available: {'yes' if torch.cuda.is_available() else 'no'}; "
      f"MPS available: {'yes' if mps is not None and mps.is_available() else 'no'})")
print("cuda_build=" + ("yes" if torch.version.cuda else "no"))
print("cuda_available=" + ("yes" if torch.cuda.is_available() else "no"))
"""


@dataclass(frozen=True)
class Plan:
    gpu: str
    version: str  # what `torch.__version__` should read (for cuda: any local label but +cpu)
    requirement: str
    header: str
    why: str
    first_index: str | None = None  # an --extra-index-url for the first try
    fallback_index: str | None = None  # retried with it when the first sources have no match


def plan_for(gpu: str, platform: str | None = None, environ: dict[str, str] | None = None) -> Plan:
    platform = platform or sys.platform
    environ = os.environ if environ is None else environ
    if gpu == "cuda":
        index = environ.get("TORCH_INDEX_URL") or None
        source = f"TORCH_INDEX_URL={index}" if index else "PyPI, whose Linux wheel is the CUDA build"
        # The exclusion stops pip from taking a +cpu wheel a find-links folder offers for the same version.
        return Plan(
            "cuda",
            TORCH_VERSION,
            f"torch=={TORCH_VERSION},!={TORCH_VERSION}+cpu",
            "== torch: CUDA build (GPU=cpu for the CPU build)",
            f"torch=={TORCH_VERSION} from {source}: several GB to download (torch + nvidia-* libraries)",
            first_index=index,
        )
    if platform == "darwin":
        return Plan(
            "cpu",
            TORCH_VERSION,
            f"torch=={TORCH_VERSION}",
            "== torch: CPU build with MPS (PyPI's macOS wheel)",
            f"torch=={TORCH_VERSION}: on macOS PyPI's wheel is the CPU + Metal (MPS) build",
        )
    return Plan(
        "cpu",
        f"{TORCH_VERSION}+cpu",
        f"torch=={TORCH_VERSION}+cpu",
        "== torch: CPU build (GPU=cuda for the CUDA build)",
        f"torch=={TORCH_VERSION}+cpu: the CPU-only wheel (~185 MB); PyPI's default Linux wheel is "
        f"the CUDA build (several GB)",
        fallback_index=CPU_INDEX_URL,
    )


def installed_torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def is_right_flavour(plan: Plan, installed: str | None) -> bool:
    if installed is None:
        return False
    if plan.gpu == "cpu":
        return installed == plan.version
    base, _, local = installed.partition("+")
    return base == plan.version and local != "cpu"


def pip_install_command(requirement: str, index: str | None) -> list[str]:
    cmd = [sys.executable, "-P", "-m", "pip", "install", "--disable-pip-version-check", requirement]
    return cmd + (["--extra-index-url", index] if index else [])


def run_streamed(cmd: list[str]) -> tuple[int, str]:
    """Run, echoing each output line as it comes (torch downloads are long), and keep the output."""
    print("+ " + shlex.join(cmd), flush=True)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    lines = []
    with proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    return proc.returncode, "".join(lines)


def install(plan: Plan) -> int:
    status, output = run_streamed(pip_install_command(plan.requirement, plan.first_index))
    if status and plan.fallback_index and NO_MATCH in output:
        print(
            f"== torch: the configured pip sources have no {plan.requirement}; retrying with {plan.fallback_index}",
            flush=True,
        )
        status, _ = run_streamed(pip_install_command(plan.requirement, plan.fallback_index))
    return status


def replace_wrong_flavour(installed: str) -> int:
    # pip treats 2.13.0+cpu as satisfying torch==2.13.0 (and the other way round), so it would keep it.
    print(
        f"== torch: {installed} is installed, not the wanted build: replacing it "
        "(nvidia-* packages a CUDA build pulled stay; `make clean-venv` for a clean venv)",
        flush=True,
    )
    return subprocess.run([sys.executable, "-P", "-m", "pip", "uninstall", "-y", "-q", "torch"]).returncode


def report_installed(plan: Plan) -> int:
    result = subprocess.run([sys.executable, "-P", "-c", REPORT_SCRIPT], capture_output=True, text=True)
    if result.returncode:
        print(f"== torch: import failed after install:\n{result.stderr}", file=sys.stderr)
        return result.returncode
    lines = result.stdout.splitlines()
    print(lines[0], flush=True)
    facts = dict(line.split("=", 1) for line in lines[1:])
    for warning in flavour_warnings(plan, facts["cuda_build"] == "yes", facts["cuda_available"] == "yes"):
        print(f"warning: {warning}", flush=True)
    return 0


def flavour_warnings(plan: Plan, cuda_build: bool, cuda_available: bool) -> list[str]:
    if plan.gpu == "cuda" and not cuda_build:
        return [
            f"GPU=cuda, but this torch is a CPU build (PyPI's Windows wheel is one; or a pip source supplied it: "
            f"pip config list). Try TORCH_INDEX_URL={CUDA_INDEX_EXAMPLE} make setup GPU=cuda"
        ]
    if plan.gpu == "cuda" and not cuda_available:
        return ["this is the CUDA build, but no CUDA device is visible: check the NVIDIA driver (nvidia-smi)"]
    if plan.gpu == "cpu" and cuda_build:
        return ["GPU=cpu, but this torch is a CUDA build"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dry-run", action="store_true", help="say what would be installed, install nothing")
    args = parser.parse_args(argv)
    if args.gpu == "cuda" and sys.platform == "darwin":
        print(
            "== torch: there is no CUDA on macOS; `make setup` (GPU=cpu) installs the MPS build",
            file=sys.stderr,
        )
        return 2
    plan = plan_for(args.gpu)
    print(plan.header, flush=True)
    print(f"   {plan.why}", flush=True)
    installed = installed_torch_version()
    if is_right_flavour(plan, installed):
        print(f"== torch: {installed} already installed, the wanted build: nothing to install", flush=True)
        return 0 if args.dry_run else report_installed(plan)
    if args.dry_run:
        print("would run: " + shlex.join(pip_install_command(plan.requirement, plan.first_index)))
        if plan.fallback_index:
            print(
                f"   and on '{NO_MATCH}': "
                + shlex.join(pip_install_command(plan.requirement, plan.fallback_index))
            )
        return 0
    status = replace_wrong_flavour(installed) if installed else 0
    status = status or install(plan)
    return status or report_installed(plan)


if __name__ == "__main__":
    sys.exit(main())
