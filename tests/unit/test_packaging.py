"""The wheel built from the repository carries resources/ and runs from anywhere.

The wheel is built offline from a copy of the sources (the checkout keeps no build/ folder) and
installed into a fresh venv whose dependencies come from this venv through a .pth file, so
nothing is downloaded.
"""

from __future__ import annotations

import configparser
import json
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.core.resources import (
    CALIBRATION_SAMPLE,
    DESKTOP_FILE,
    DEV_SUITE,
    ICON_NAME,
    ICON_SIZES,
    RESOURCE_PACKAGE,
    desktop_file_path,
    icon_paths,
)

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "engine", "desktop", "resources")
CODE_PACKAGES = ("engine", "desktop")
TIMEOUT_S = 120

# Run by the installed interpreter: where each resource is read from, through the helper.
RESOURCE_PROBE = """
import json
from engine.core import resources, samples
from engine.eval.suite import load_suite
cases = load_suite(resources.dev_suite_path())
print(json.dumps({
    "root": str(resources.resources_root()),
    "helper": resources.__file__,
    "calibration_chars": len(resources.calibration_sample()),
    "suite": str(resources.dev_suite_path()),
    "docs": sorted({str(case.doc) for case in cases}),
    "missing_docs": sorted({str(case.doc) for case in cases if not case.doc.exists()}),
    "desktop_file": str(resources.desktop_file_path()),
    "samples": str(samples.samples_folder()),
    "icons": [str(path) for path in resources.icon_paths() if path.is_file()],
}))
"""

# Run by the installed interpreter: the window icon the app builds from the packaged icon set.
ICON_PROBE = """
from PySide6.QtWidgets import QApplication
from desktop.app import app_icon
app = QApplication([])
print(sorted({size.width() for size in app_icon().availableSizes()}))
"""


@dataclass(frozen=True)
class Install:
    bin: Path
    site_packages: Path
    workdir: Path  # outside the repository

    def run(self, args: list[str]) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(
            HF_HUB_OFFLINE="1", QT_QPA_PLATFORM="offscreen", XDG_CACHE_HOME=str(self.workdir / "cache")
        )
        proc = subprocess.run(
            args, cwd=self.workdir, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert proc.returncode == 0, proc.stderr
        return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        copy_source(REPO / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(src))
    (built,) = out.glob("specprefill-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Install:
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site_packages = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    (site_packages / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip("--python", str(python), "install", "--no-deps", str(wheel))  # into that venv
    return Install(
        bin=root / "bin", site_packages=site_packages, workdir=tmp_path_factory.mktemp("elsewhere")
    )


def copy_source(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        shutil.copy2(source, dest)


def pip(*args: str) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "--disable-pip-version-check",
        "--no-input",
        "-q",
        *args,
        "--no-index",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def shipped(*parts: str) -> str:
    return "/".join((RESOURCE_PACKAGE, *parts))


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", header[16:24])


def test_the_wheel_carries_the_calibration_sample_dev_suite_desktop_file_and_icons(wheel):
    names = wheel_names(wheel)
    package, sample = CALIBRATION_SAMPLE
    expected = {
        "/".join((*package.split("."), sample)),
        shipped(*DEV_SUITE),
        shipped(*DESKTOP_FILE),
        *(shipped("icons", "hicolor", f"{n}x{n}", "apps", f"{ICON_NAME}.png") for n in ICON_SIZES),
        shipped("icons", "hicolor", "scalable", "apps", f"{ICON_NAME}.svg"),
    }
    assert expected <= names


def test_the_wheel_carries_the_sample_code_archives_and_their_manifest(wheel):
    names = wheel_names(wheel)
    code = REPO / "resources" / "samples" / "code"
    manifest = json.loads((code / "samples.json").read_text())
    expected = {shipped("samples", "code", name) for name in ["samples.json", *manifest["archives"]]}
    assert expected <= names
    assert not [n for n in names if n.startswith(shipped("samples", "code")) and n.endswith(".py")]


def test_the_wheel_carries_every_package_under_engine_and_desktop(wheel):
    names = wheel_names(wheel)
    packages = {
        init.parent.relative_to(REPO).as_posix()
        for name in CODE_PACKAGES
        for init in (REPO / name).rglob("__init__.py")
    }
    assert packages, "no packages found"
    assert {package for package in packages if f"{package}/__init__.py" not in names} == set()


def test_the_wheel_declares_a_console_script_and_a_gui_script(wheel):
    with zipfile.ZipFile(wheel) as archive:
        entry_points = next(
            name for name in archive.namelist() if name.endswith(".dist-info/entry_points.txt")
        )
        parser = configparser.ConfigParser()
        parser.read_string(archive.read(entry_points).decode())
    assert dict(parser["console_scripts"]) == {"specprefill": "engine.cli.main:main"}
    assert dict(parser["gui_scripts"]) == {"specprefill-gui": "desktop.app:main"}


@pytest.mark.slow
def test_the_installed_commands_run_outside_the_repository(installed):
    assert installed.run([installed.bin / "specprefill", "--version"]).stdout.startswith("specprefill ")
    assert "--lengths" in installed.run([installed.bin / "specprefill", "calibrate", "--help"]).stdout
    assert installed.run([installed.bin / "specprefill-gui", "--version"]).stdout.startswith(
        "specprefill-gui "
    )


def test_the_installed_resources_are_read_from_the_installed_package(installed):
    found = json.loads(installed.run([installed.bin / "python", "-c", RESOURCE_PROBE]).stdout)
    paths = [
        found["root"],
        found["helper"],
        found["suite"],
        found["desktop_file"],
        found["samples"],
        *found["icons"],
    ]
    assert all(Path(path).is_relative_to(installed.site_packages) for path in paths), paths
    # a sample code base (toolz-core) is extracted from the installed archive into the user cache
    sample_cache = installed.workdir / "cache" / "specprefill" / "samples"
    assert all(
        Path(doc).is_relative_to(installed.site_packages) or Path(doc).is_relative_to(sample_cache)
        for doc in found["docs"]
    ), found["docs"]
    assert any(Path(doc).is_relative_to(sample_cache) for doc in found["docs"]), found["docs"]
    assert not any(Path(path).is_relative_to(REPO) for path in [*paths, *found["docs"]]), paths
    assert found["calibration_chars"] > 10_000
    assert found["docs"] and found["missing_docs"] == []
    assert len(found["icons"]) == len(ICON_SIZES) + 1


def test_the_installed_app_builds_its_window_icon_from_the_packaged_icon_set(installed):
    sizes = json.loads(installed.run([installed.bin / "python", "-c", ICON_PROBE]).stdout)
    assert sizes == list(ICON_SIZES)


def test_the_desktop_entry_launches_the_gui_with_the_icon():
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(desktop_file_path(), encoding="utf-8")
    entry = parser["Desktop Entry"]
    assert entry["Type"] == "Application"
    assert entry["Name"] == "SpecPrefill"
    assert entry["Exec"].split()[0] == "specprefill-gui"
    assert entry["Icon"] == ICON_NAME
    assert set(entry["Categories"].rstrip(";").split(";")) >= {"Office", "Development"}
    assert set(entry["MimeType"].rstrip(";").split(";")) >= {"application/pdf", "text/plain"}


def test_each_png_icon_has_the_size_its_folder_names():
    pngs, svg = icon_paths()[:-1], icon_paths()[-1]
    assert [png_size(path) for path in pngs] == [(n, n) for n in ICON_SIZES]
    assert svg.read_text(encoding="utf-8").lstrip().startswith("<?xml")
