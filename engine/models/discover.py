"""The GGUF models already on this machine (see discover_sources for where), read-only.

Each file is listed once however many links lead to it (LM Studio and Hugging Face snapshots
link to blobs), with what its header says; the weights are never read, nothing is copied or
written. A file that cannot be read (a FIFO or a folder among them: it is never opened for
reading) is listed with the reason instead of its facts. Names, ids and reasons hold no control
characters (engine.models.untrusted.printable): the folders and files come from the internet.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.models.discover_sources import Source, model_sources
from engine.models.discover_walk import MAX_ENTRIES, Candidate, Walk, candidates
from engine.models.gguf_facts import GGUFFacts, read_facts
from engine.models.untrusted import printable


@dataclass(frozen=True)
class DiscoveredModel:
    name: str
    ident: str
    source: str
    path: Path  # as found (a link, for LM Studio and HF snapshots)
    resolved_path: Path
    size_bytes: int
    facts: GGUFFacts | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        facts = asdict(self.facts) if self.facts else dict.fromkeys(GGUFFacts.__dataclass_fields__)
        return {
            "name": self.name,
            "id": self.ident,
            "source": self.source,
            **facts,
            "size_bytes": self.size_bytes,
            "path": str(self.path),
            "resolved_path": str(self.resolved_path),
            "error": self.error,
        }


@dataclass(frozen=True)
class SourceReport:
    kind: str
    root: Path
    exists: bool
    models: int
    truncated: bool  # the walk stopped at MAX_ENTRIES

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.root),
            "exists": self.exists,
            "models": self.models,
            "truncated": self.truncated,
        }


@dataclass(frozen=True)
class Discovery:
    sources: list[SourceReport]
    models: list[DiscoveredModel]

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": [s.to_json() for s in self.sources],
            "models": [m.to_json() for m in self.models],
            "max_entries_per_source": MAX_ENTRIES,
        }


def _resolved(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except OSError:
        return path


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path) -> tuple[GGUFFacts | None, str | None]:
    """(facts, None), or (None, why): an untrusted file's failure is a line in the listing, not a traceback."""
    try:
        return read_facts(path), None
    except OSError as exc:
        return None, exc.strerror or str(exc)
    except ValueError as exc:  # GGUFHeaderError among them
        return None, str(exc)


def describe(candidate: Candidate, resolved: Path) -> DiscoveredModel:
    """The candidate with its header's facts, or with the reason it could not be read."""
    facts, error = _read(resolved)
    return DiscoveredModel(
        printable(candidate.name),
        printable(candidate.ident),
        candidate.kind,
        candidate.path,
        resolved,
        _size(resolved),
        facts,
        printable(error) if error else None,
    )


def _walk_source(source: Source, seen: set[Path]) -> tuple[SourceReport, list[DiscoveredModel]]:
    walk, found = Walk(), []
    for candidate in candidates(source, walk):
        resolved = _resolved(candidate.path)
        if resolved not in seen:
            seen.add(resolved)
            found.append(describe(candidate, resolved))
    report = SourceReport(source.kind, source.root, source.root.is_dir(), len(found), walk.truncated)
    return report, found


def discover(extra_dirs: tuple[str | os.PathLike[str], ...] = ()) -> Discovery:
    """Every GGUF in the usual places and in `extra_dirs`, each file once (by its resolved path)."""
    seen: set[Path] = set()
    reports, models = [], []
    for source in model_sources(extra_dirs):
        report, found = _walk_source(source, seen)
        reports.append(report)
        models += found
    return Discovery(reports, models)
