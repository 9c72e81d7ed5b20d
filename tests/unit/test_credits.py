"""The licences the About box lists and THIRD_PARTY.md cannot drift apart."""

from __future__ import annotations

import tomllib
from pathlib import Path

from engine.core.credits import APP, CREDITS

REPO = Path(__file__).resolve().parents[2]


def test_third_party_md_lists_every_notice_with_its_licence_and_origin():
    text = (REPO / "THIRD_PARTY.md").read_text()
    missing = [n.name for n in CREDITS[1:] if f"| {n.name} | {n.licence} | {n.origin} |" not in text]
    assert missing == []


def test_the_app_licence_is_the_one_pyproject_and_license_state():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert pyproject["license"] == APP.licence == "MIT"
    assert (REPO / "LICENSE").read_text().startswith("MIT License")
    assert {"LICENSE", "THIRD_PARTY.md"} <= set(pyproject["license-files"])
