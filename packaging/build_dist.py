"""Build the desktop bundle dist/specprefill/ with PyInstaller (`make dist`).

Usage: .venv/bin/python packaging/build_dist.py [--if-stale]

Installs the `dist` extra of pyproject.toml (PyInstaller) into this interpreter when it is missing,
builds from packaging/specprefill.spec, then prints the build time and the bundle's size.
--if-stale skips the build when dist/specprefill.stamp says the bundle was built from the same
sources and installed packages (the bundle test uses it; `make dist` always builds).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "packaging" / "specprefill.spec"
DIST_DIR = ROOT / "dist"
WORK_DIR = ROOT / "build" / "pyinstaller"
BUNDLE = DIST_DIR / "specprefill"
EXECUTABLE = BUNDLE / "specprefill"
STAMP = DIST_DIR / "specprefill.stamp"  # beside the bundle, not in it: deleting dist/ deletes both
# What the bundle is built from: a change in any of them makes it stale.
SOURCES = [
    "engine",
    "desktop",
    "resources",
    "packaging/specprefill.spec",
    "packaging/dist_entry.py",
    "packaging/build_dist.py",
    "pyproject.toml",
]
# The big pieces the size report names, relative to the bundle's _internal/ folder.
PIECES = {
    "torch": ["torch", "functorch", "torchgen"],
    "Qt": ["PySide6", "shiboken6"],
    "llama": ["llama_cpp"],
    "transformers": ["transformers", "tokenizers"],
}


def dist_requirements() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["project"]["optional-dependencies"]["dist"]


def ensure_pyinstaller() -> None:
    """PyInstaller is a build tool only, so `make setup` leaves it out: install it here on first use."""
    try:
        import PyInstaller  # noqa: F401
    except ModuleNotFoundError:
        requirements = dist_requirements()
        print(f"installing {' '.join(requirements)}", flush=True)
        subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *requirements,
            ],
            check=True,
        )


def source_hash() -> str:
    """A digest of every source file and of the installed distributions' versions."""
    digest = hashlib.sha256()
    for path in _source_files():
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    for name, version in sorted(_installed_versions()):
        digest.update(f"{name}=={version}\n".encode())
    return digest.hexdigest()


def _source_files() -> list[Path]:
    files = []
    for name in SOURCES:
        path = ROOT / name
        found = [path] if path.is_file() else path.rglob("*")
        files += [p for p in found if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return sorted(files)


def _installed_versions() -> set[tuple[str, str]]:
    return {(dist.metadata["Name"] or "?", dist.version) for dist in importlib.metadata.distributions()}


def is_up_to_date() -> bool:
    return EXECUTABLE.is_file() and STAMP.is_file() and STAMP.read_text().strip() == source_hash()


def run_pyinstaller() -> None:
    STAMP.unlink(missing_ok=True)  # a failed build must not look up to date
    # The hooks import every torch submodule to list them: hundreds of DeprecationWarnings that say nothing.
    env = {**os.environ, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--log-level",
            "WARN",
            "--distpath",
            str(DIST_DIR),
            "--workpath",
            str(WORK_DIR),
            str(SPEC),
        ],
        cwd=ROOT,
        env=env,
        check=True,
    )
    if not EXECUTABLE.is_file():
        raise SystemExit(f"PyInstaller finished but {EXECUTABLE} is missing")


def du_bytes(path: Path) -> int:
    """Disk use like `du -s`: every file once (hard links counted once), symlinks not followed."""
    seen, total = set(), 0
    for item in [path, *path.rglob("*")] if path.exists() else []:
        stat = item.lstat()
        if (stat.st_dev, stat.st_ino) not in seen:
            seen.add((stat.st_dev, stat.st_ino))
            total += stat.st_blocks * 512
    return total


def size_report() -> list[str]:
    internal = BUNDLE / "_internal"
    lines = [f"bundle {BUNDLE.relative_to(ROOT)}: {_mib(du_bytes(BUNDLE))}"]
    for piece, folders in PIECES.items():
        lines.append(f"  {piece:<13} {_mib(sum(du_bytes(internal / folder) for folder in folders))}")
    return lines


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.0f} MiB"


def build(if_stale: bool) -> None:
    if if_stale and is_up_to_date():
        print(f"{BUNDLE.relative_to(ROOT)} is up to date (built from the same sources)")
        return
    ensure_pyinstaller()
    stamp = source_hash()  # before the build: an edit made while it runs leaves the bundle stale
    started = time.monotonic()
    run_pyinstaller()
    STAMP.write_text(stamp + "\n")
    minutes, seconds = divmod(round(time.monotonic() - started), 60)
    print(*size_report(), sep="\n")
    print(f"build time: {minutes} min {seconds:02d} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Build the desktop bundle dist/specprefill/ with PyInstaller."
    )
    parser.add_argument(
        "--if-stale", action="store_true", help="skip the build when the bundle is up to date"
    )
    build(parser.parse_args(argv).if_stale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
