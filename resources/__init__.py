"""Data files shipped with the app: the desktop entry, the icons, the dev suite and the documents it uses.

This folder is installed as the package `specprefill_resources` (see pyproject.toml); read its files
through `engine.core.resources`, never through a path into the repository.
"""
