"""The data files shipped with the app, found through `importlib.resources`, never through the repository.

`resources/` of the repository is installed as the package `specprefill_resources` (see pyproject.toml):
the desktop entry, the icon set, the dev suite and the documents it names. The calibration sample is
package data of `engine.eval`.
"""

from __future__ import annotations

import importlib.util
from importlib import resources
from pathlib import Path

RESOURCE_PACKAGE = "specprefill_resources"
# Run from a source checkout whose install predates the package: the folder itself, beside engine/.
CHECKOUT_RESOURCES = Path(__file__).resolve().parents[2] / "resources"
CALIBRATION_SAMPLE = ("engine.eval", "calibration_sample.md")
DEV_SUITE = ("eval", "dev.jsonl")
DESKTOP_FILE = ("desktop", "specprefill.desktop")
ICON_NAME = "specprefill"
ICON_SIZES = (16, 32, 48, 64, 128, 256)


def resources_root() -> Path:
    """The folder `specprefill_resources` is installed in (pip installs packages as plain files).

    It is data only, with no Python file, so Python sees a namespace package: of the folders that
    carry its name on the path, the one that holds the dev suite."""
    spec = importlib.util.find_spec(RESOURCE_PACKAGE)
    locations = [Path(location) for location in (spec.submodule_search_locations or [])] if spec else []
    if not locations:
        return CHECKOUT_RESOURCES
    for location in locations:
        if location.joinpath(*DEV_SUITE).is_file():
            return location
    # a zip import, say: its files have no path to hand to a reader
    raise RuntimeError(f"{RESOURCE_PACKAGE} is not installed as plain files: {locations}")


def resource_path(*parts: str) -> Path:
    """A shipped file or folder, e.g. `resource_path("eval", "dev.jsonl")`."""
    return resources_root().joinpath(*parts)


def dev_suite_path() -> Path:
    """The 12-case dev suite; its document paths are relative to it and ship with it."""
    return resource_path(*DEV_SUITE)


def desktop_file_path() -> Path:
    return resource_path(*DESKTOP_FILE)


def icon_paths() -> list[Path]:
    """The app icon at each PNG size, then the scalable SVG (freedesktop `hicolor` layout)."""
    hicolor = resource_path("icons", "hicolor")
    pngs = [hicolor / f"{size}x{size}" / "apps" / f"{ICON_NAME}.png" for size in ICON_SIZES]
    return [*pngs, hicolor / "scalable" / "apps" / f"{ICON_NAME}.svg"]


def calibration_sample() -> str:
    """The text `specprefill calibrate` times on when no --doc is given."""
    package, name = CALIBRATION_SAMPLE
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")
