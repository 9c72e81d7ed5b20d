"""The app's name and version, as the installed package records it."""

from __future__ import annotations

from importlib import metadata

APP_NAME = "SpecPrefill"


def app_version() -> str:
    try:
        return metadata.version("specprefill")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"
