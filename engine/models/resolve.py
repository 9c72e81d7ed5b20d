"""A model given by the name `models --discover` lists instead of by its path."""

from __future__ import annotations

from pathlib import Path

from engine.core.errors import ModelError
from engine.models.discover import DiscoveredModel, discover
from engine.models.untrusted import printable


def _keys(model: DiscoveredModel) -> set[str]:
    """What a model answers to, case-folded: its name, its id, and the id without the source."""
    ident = model.ident.casefold()
    return {model.name.casefold(), ident, ident.split(":", 1)[-1]}


def matches(text: str, models: list[DiscoveredModel]) -> list[DiscoveredModel]:
    wanted = text.casefold()
    return [m for m in models if wanted in _keys(m)]


def resolve_model(value: str | Path, models: list[DiscoveredModel] | None = None) -> Path:
    """An existing path as it is; else the one discovered model of that name (its path as found).

    A name no model has comes back unchanged, so the caller's "missing" message names it; a name
    several models share is refused with their ids, one of which picks the model."""
    path = Path(value).expanduser()
    if path.exists():
        return path
    found = matches(str(value), discover().models if models is None else models)
    if not found:
        return path
    if len(found) > 1:
        listed = "; ".join(f"{m.ident} ({printable(str(m.path))})" for m in found)
        raise ModelError(f"{value} names {len(found)} models: {listed}; give one of their ids or a path")
    return found[0].path
