"""Finding the GGUF files of one source, without trusting it: the walk is bounded in depth and
entries, follows a folder link only once, and reads nothing but Ollama's small JSON manifests.
A manifest that is not one (not a regular file, too large, nested too deeply, of another shape,
naming its model by anything but a sha256) is skipped with a warning that names it."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from engine.models.discover_sources import Source
from engine.models.untrusted import MalformedFile, load_json_object, printable

log = logging.getLogger(__name__)

MAX_DEPTH = 8  # HF snapshots sit 4-5 folders deep; LM Studio's files 2
MAX_ENTRIES = 20_000  # folder entries looked at per source
MAX_MANIFEST_BYTES = 1 << 20
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
OLLAMA_DEFAULT_REGISTRY, OLLAMA_DEFAULT_NAMESPACE = "registry.ollama.ai", "library"
SHA256_DIGEST = re.compile(r"sha256[:-]([0-9a-f]{64})")
SHARD = re.compile(r"-(\d{5})-of-(\d{5})$")  # model-00002-of-00003.gguf: only the first part is listed


@dataclass(frozen=True)
class Candidate:
    kind: str
    name: str  # what a user types: the file's stem, or Ollama's model:tag
    ident: str  # unique within its source: "lmstudio:publisher/repo/stem"
    path: Path


@dataclass
class Walk:
    """A bounded walk's budget, shared by every folder of one source."""

    entries: int = 0
    truncated: bool = False
    seen_dirs: set[tuple[int, int]] = field(default_factory=set)

    def enter(self, path: Path) -> bool:
        """False for a folder already walked (a link loop) or once the budget is spent."""
        try:
            st = path.stat()
        except OSError:
            return False
        key = (st.st_dev, st.st_ino)
        if key in self.seen_dirs:
            return False
        self.seen_dirs.add(key)
        return True

    def count(self) -> bool:
        self.entries += 1
        if self.entries > MAX_ENTRIES:
            self.truncated = True
        return not self.truncated


def gguf_files(root: Path, walk: Walk, depth: int = 0) -> Iterator[Path]:
    """*.gguf under root (links followed), folders and files in name order, within the walk's budget."""
    if depth > MAX_DEPTH or not walk.enter(root):
        return
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if not walk.count():
            return
        path = Path(entry.path)
        if entry.name.lower().endswith(".gguf") and _is_file(entry):
            yield path
        elif _is_dir(entry):
            yield from gguf_files(path, walk, depth + 1)


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def model_stem(path: Path) -> str | None:
    """The name a file is listed under, or None for a later part of a split model."""
    stem = path.name[: -len(".gguf")]
    shard = SHARD.search(stem)
    if shard is None:
        return stem
    return stem[: shard.start()] if int(shard.group(1)) == 1 else None


def folder_candidates(source: Source, walk: Walk) -> Iterator[Candidate]:
    for path in gguf_files(source.root, walk):
        stem = model_stem(path)
        if stem is not None:
            relative = path.relative_to(source.root).as_posix()[: -len(".gguf")]
            yield Candidate(source.kind, stem, f"{source.kind}:{relative}", path)


def huggingface_candidates(source: Source, walk: Walk) -> Iterator[Candidate]:
    """models--<org>--<repo>/snapshots/<revision>/**/*.gguf: links into blobs/, listed under the repo."""
    for repo_dir in _subdirs(source.root, walk):
        if not repo_dir.name.startswith("models--"):
            continue
        repo = repo_dir.name.removeprefix("models--").replace("--", "/")
        for snapshot in _subdirs(repo_dir / "snapshots", walk):
            for path in gguf_files(snapshot, walk, depth=3):
                stem = model_stem(path)
                if stem is not None:
                    inner = path.relative_to(snapshot).as_posix()[: -len(".gguf")]
                    yield Candidate(source.kind, stem, f"huggingface:{repo}/{inner}", path)


def _subdirs(path: Path, walk: Walk) -> list[Path]:
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return []
    return [Path(e.path) for e in entries if walk.count() and _is_dir(e)]


def ollama_candidates(source: Source, walk: Walk) -> Iterator[Candidate]:
    """manifests/<registry>/<namespace>/<model>/<tag> name the model's layer, a blob by its digest."""
    for registry in _subdirs(source.root / "manifests", walk):
        for namespace in _subdirs(registry, walk):
            for model in _subdirs(namespace, walk):
                for tag in _manifest_files(model, walk):
                    blob = _manifest_blob(source.root, tag)
                    if blob is not None:
                        name = ollama_name(registry.name, namespace.name, model.name, tag.name)
                        yield Candidate(source.kind, name, f"ollama:{name}", blob)


def _manifest_blob(root: Path, manifest: Path) -> Path | None:
    """The manifest's model blob; None, with a warning, for a manifest that cannot be read."""
    try:
        return ollama_blob(root, manifest)
    except (OSError, MalformedFile) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        log.warning("skipped Ollama manifest %s: %s", printable(str(manifest)), printable(why))
        return None


def _manifest_files(model: Path, walk: Walk) -> list[Path]:
    try:
        entries = sorted(os.scandir(model), key=lambda e: e.name)
    except OSError:
        return []
    return [Path(e.path) for e in entries if walk.count() and _is_file(e)]


def ollama_name(registry: str, namespace: str, model: str, tag: str) -> str:
    """As `ollama list` shows it: "qwen2.5:1.5b", "user/model:tag", "hf.co/org/repo:Q4_K_M"."""
    if registry != OLLAMA_DEFAULT_REGISTRY:
        return f"{registry}/{namespace}/{model}:{tag}"
    return f"{model}:{tag}" if namespace == OLLAMA_DEFAULT_NAMESPACE else f"{namespace}/{model}:{tag}"


def ollama_blob(root: Path, manifest: Path) -> Path | None:
    """The model layer's blob named by a manifest; None for a manifest without a model layer.
    The digest must be a sha256 in hex, so a manifest cannot point outside blobs/.
    Raises MalformedFile for a file that is not a manifest, OSError for one that cannot be read."""
    layers = load_json_object(manifest, MAX_MANIFEST_BYTES).get("layers", [])
    if not isinstance(layers, list):
        raise MalformedFile("its layers are not a list")
    for layer in layers:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER:
            return root / "blobs" / f"sha256-{_sha256_hex(layer.get('digest'))}"
    return None


def _sha256_hex(digest: object) -> str:
    """The hex of a "sha256:<64 hex>" digest; MalformedFile for anything else."""
    found = SHA256_DIGEST.fullmatch(digest) if isinstance(digest, str) else None
    if found is None:
        raise MalformedFile("its model layer's digest is not a sha256")
    return found.group(1)


def candidates(source: Source, walk: Walk) -> Iterator[Candidate]:
    finder = {"ollama": ollama_candidates, "huggingface": huggingface_candidates}.get(
        source.kind, folder_candidates
    )
    return finder(source, walk)
