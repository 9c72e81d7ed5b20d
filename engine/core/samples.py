"""The sample code bases (structlog, toolz, cachetools), kept as archives and opened as folders.

Other people's source is data here, not code of this project: each code base is one deterministic
`.tar.gz` in resources/samples/code/ (its files under one top folder, its licence and README-SOURCE.md
among them), and samples.json there records each archive's SHA-256 and which members make each
sample. A sample is a top folder of an archive ("root"), or a list of members ("members": toolz-core is
a part of toolz.tar.gz, not a second copy); a member's first path component is dropped on extraction.

`sample_folder(name)` hands out a sample as a folder: the archive's hash is checked against the
manifest on every call (a mismatch raises SampleError), and the first call extracts it into the user
cache (engine.core.paths.cache_dir()/samples/<name>-<key>/<name>), read-only (files 0444, folders
0555). Extraction refuses any member that is not a plain file or folder, or whose name is absolute or
climbs out with `..`, and then extracts with tarfile's "data" filter as well. It goes into a temporary
folder that is renamed into place under the sample's lock, so another process sees the whole tree or
none; an extraction of another key (an older archive) or a partial one is removed then. The app's
cache tightening (engine.core.private) may later take the group and other bits off those folders.

`sample_at(path)` maps a path such as `resources/samples/code/toolz-core` (a suite's `doc`, a
`--doc`) to its extracted folder, or None when the path names no sample.

`pack(out, files)` writes an archive deterministically (sorted members, mtime 0, uid/gid 0, no owner
names, gzip mtime 0), so packing the same files again gives the same bytes (with the same zlib); then
record its new SHA-256 in samples.json. From the command line:

    python -m engine.core.samples path structlog      # the extracted folder, e.g. for `--doc`
    python -m engine.core.samples pack resources/samples/code/toolz.tar.gz toolz=DIR toolz-core=DIR2
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from engine.core.errors import SpecPrefillError
from engine.core.hashing import sha256_file
from engine.core.locks import artefact_lock, cache_writes
from engine.core.paths import cache_dir
from engine.core.private import private_dir
from engine.core.resources import resource_path

SAMPLES_FOLDER = ("samples", "code")  # under the resources root
MANIFEST = "samples.json"
CACHE_FOLDER = "samples"  # under engine.core.paths.cache_dir()
FILE_MODE = 0o444
DIR_MODE = 0o555
ARCHIVE_FILE_MODE = 0o644
KEY_CHARS = 16
PARTIAL_PREFIX = ".partial-"
MAX_UNPACKED_BYTES = 64 << 20  # far above the samples (under 1 MiB each): a bound for a crafted archive
MAX_MEMBERS = 10_000
GZIP_LEVEL = 9


class SampleError(SpecPrefillError):
    """A sample is unknown, its archive is missing or fails its hash, or the archive holds an unsafe member."""


@dataclass(frozen=True)
class Sample:
    name: str
    archive: Path
    sha256: str
    root: str | None  # every member under this top folder
    members: tuple[str, ...] | None  # or exactly these members

    @property
    def key(self) -> str:
        """Names the extraction: the archive's hash and the choice of members, so a change to either
        extracts anew."""
        spec = json.dumps([self.name, self.sha256, self.root, self.members])
        return hashlib.sha256(spec.encode()).hexdigest()[:KEY_CHARS]


def samples_folder() -> Path:
    """resources/samples/code as shipped (the archives and samples.json)."""
    return resource_path(*SAMPLES_FOLDER)


def sample_cache() -> Path:
    return cache_dir() / CACHE_FOLDER


def sample_names(folder: Path | None = None) -> list[str]:
    return sorted(_read_manifest(folder or samples_folder())["samples"])


def sample_folder(name: str, *, folder: Path | None = None, cache: Path | None = None) -> Path:
    """The sample's extracted folder (made on first use). `folder` holds the archives and samples.json
    (default: the shipped ones); `cache` is where samples are extracted (default: the user cache)."""
    sample = load_sample(name, folder or samples_folder())
    return _extracted(sample, Path(cache) if cache is not None else sample_cache())


def sample_at(path: str | os.PathLike[str], *, cache: Path | None = None) -> Path | None:
    """The extracted folder for a path that names a sample (`<folder with samples.json>/<name>`), or
    None when it names none."""
    path = Path(os.path.abspath(Path(path).expanduser()))
    manifest = path.parent / MANIFEST
    if not path.name or not manifest.is_file():
        return None
    if path.name not in _read_manifest(path.parent)["samples"]:
        return None
    return sample_folder(path.name, folder=path.parent, cache=cache)


def resolve_sample_path(path: str | os.PathLike[str]) -> Path:
    """`path` itself, or the extracted folder when it names a sample (for a `--doc` argument)."""
    return sample_at(path) or Path(path)


def load_sample(name: str, folder: Path) -> Sample:
    """The manifest's entry for `name`, with its archive checked against the recorded SHA-256."""
    manifest = _read_manifest(folder)
    entry = manifest["samples"].get(name)
    if entry is None:
        known = ", ".join(sorted(manifest["samples"])) or "none"
        raise SampleError(f"no sample code base named {name!r} in {folder / MANIFEST} (known: {known})")
    archive_name = entry.get("archive") if isinstance(entry, dict) else None
    if not isinstance(archive_name, str) or Path(archive_name).name != archive_name:
        raise SampleError(f"{folder / MANIFEST}: sample {name!r} names no archive file in its folder")
    expected = manifest["archives"].get(archive_name)
    if not isinstance(expected, str):
        raise SampleError(f"{folder / MANIFEST}: sample {name!r} names an archive with no SHA-256")
    root, members = entry.get("root"), entry.get("members")
    if (root is None) == (members is None):
        raise SampleError(f"{folder / MANIFEST}: sample {name!r} needs either 'root' or 'members'")
    archive = folder / archive_name
    actual = _sha256(archive)
    if actual != expected.lower():
        raise SampleError(
            f"sample archive {archive} fails its hash: SHA-256 {actual}, {MANIFEST} records {expected}"
            " (a damaged or altered archive is not extracted)"
        )
    return Sample(name, archive, actual, root, tuple(members) if members is not None else None)


def _read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise SampleError(f"no sample manifest at {path}") from e
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SampleError(f"cannot read the sample manifest {path}: {e}") from e
    if not (
        isinstance(data, dict)
        and isinstance(data.get("archives"), dict)
        and isinstance(data.get("samples"), dict)
    ):
        raise SampleError(f"{path}: expected an object with 'archives' and 'samples'")
    return data


def _sha256(path: Path) -> str:
    try:
        return sha256_file(path)
    except FileNotFoundError as e:
        raise SampleError(f"sample archive missing: {path}") from e
    except OSError as e:
        raise SampleError(f"cannot read the sample archive {path}: {e}") from e


# ---- extraction ----


def _extracted(sample: Sample, cache: Path) -> Path:
    home = cache / f"{sample.name}-{sample.key}"
    final = home / sample.name
    if final.is_dir():  # it only ever appears whole (a rename)
        return final
    with cache_writes(cache):
        private_dir(cache)
    with artefact_lock(home):
        if final.is_dir():  # another process made it while we waited
            return final
        with cache_writes(cache):
            _remove_stale(cache, sample.name, keep=home.name)
            _remove_tree(home)  # a folder of this key without the sample in it: not ours to trust
            partial = Path(tempfile.mkdtemp(dir=cache, prefix=f"{PARTIAL_PREFIX}{sample.name}-"))
            try:
                _extract(sample, partial / sample.name)
                os.rename(partial, home)
            except BaseException:
                _remove_tree(partial)
                raise
    return final


def _remove_stale(cache: Path, name: str, keep: str) -> None:
    """Another key's extraction of this sample, and partial ones (only while holding the lock)."""
    ours = re.compile(re.escape(name) + rf"-[0-9a-f]{{{KEY_CHARS}}}")
    partial = re.compile(re.escape(PARTIAL_PREFIX + name) + r"-[^-]+")  # mkdtemp's suffix has no '-'
    for entry in cache.iterdir():
        if entry.name == keep or entry.is_symlink() or not entry.is_dir():
            continue
        if ours.fullmatch(entry.name) or partial.fullmatch(entry.name):
            _remove_tree(entry)


def _remove_tree(path: Path) -> None:
    """Remove a tree whose folders may be read-only (as extracted samples are)."""
    if not path.exists():
        return
    for folder, _dirs, _files in os.walk(path):
        os.chmod(folder, 0o700)
    shutil.rmtree(path)


def _extract(sample: Sample, dest: Path) -> None:
    try:
        with tarfile.open(sample.archive, "r:gz") as tar:
            members = tar.getmembers()
            chosen = _choose(sample, _checked(sample.archive, members))
            dest.mkdir()
            tar.extractall(dest, members=chosen, filter=_strip_and_data_filter)
    except (tarfile.TarError, EOFError, gzip.BadGzipFile) as e:
        raise SampleError(f"cannot read the sample archive {sample.archive}: {e}") from e
    _make_read_only(dest)


def _checked(archive: Path, members: list[tarfile.TarInfo]) -> dict[str, tarfile.TarInfo]:
    """Every member by name, each a plain file or folder with a relative name inside the archive."""
    if len(members) > MAX_MEMBERS:
        raise SampleError(f"unsafe sample archive {archive}: {len(members)} members")
    by_name: dict[str, tarfile.TarInfo] = {}
    total = 0
    for m in members:
        if not (m.isreg() or m.isdir()):
            raise SampleError(f"unsafe sample archive {archive}: {m.name!r} is not a plain file or folder")
        name = _safe_name(archive, m.name)
        if name in by_name:
            raise SampleError(f"unsafe sample archive {archive}: {m.name!r} appears twice")
        by_name[name] = m
        total += m.size
    if total > MAX_UNPACKED_BYTES:
        raise SampleError(f"unsafe sample archive {archive}: {total} bytes unpacked")
    return by_name


def _safe_name(archive: Path, name: str) -> str:
    pure = PurePosixPath(name)
    bad = (
        not name
        or "\\" in name
        or "\0" in name
        or pure.is_absolute()
        or ".." in pure.parts
        or re.match(r"[A-Za-z]:", name) is not None
    )
    if bad:
        raise SampleError(f"unsafe sample archive {archive}: member name {name!r}")
    return pure.as_posix()


def _choose(sample: Sample, by_name: dict[str, tarfile.TarInfo]) -> list[tarfile.TarInfo]:
    if sample.members is not None:
        missing = [m for m in sample.members if m not in by_name]
        if missing:
            raise SampleError(f"sample {sample.name!r}: {sample.archive.name} has no member {missing[0]!r}")
        chosen = [by_name[m] for m in sample.members]
    else:
        chosen = [
            m
            for n, m in by_name.items()
            if len(PurePosixPath(n).parts) > 1 and PurePosixPath(n).parts[0] == sample.root
        ]
    files = [m for m in chosen if m.isreg()]
    if not files:
        raise SampleError(f"sample {sample.name!r}: {sample.archive.name} has no files for it")
    if any(len(PurePosixPath(m.name).parts) < 2 for m in chosen):
        raise SampleError(f"sample {sample.name!r}: every member must sit in a top folder")
    stripped = [PurePosixPath(*PurePosixPath(m.name).parts[1:]).as_posix() for m in files]
    if len(set(stripped)) != len(stripped):
        raise SampleError(f"sample {sample.name!r}: two members extract to the same file")
    return files  # folders are made as files need them


def _strip_and_data_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """Drop the top folder, then tarfile's "data" filter (no links out, no devices, no absolute names)."""
    stripped = PurePosixPath(*PurePosixPath(member.name).parts[1:]).as_posix()
    return tarfile.data_filter(member.replace(name=stripped, deep=False), dest)


def _make_read_only(root: Path) -> None:
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            os.chmod(os.path.join(folder, name), FILE_MODE)
        os.chmod(folder, DIR_MODE)


# ---- packing ----


def files_under(folder: Path, prefix: str) -> dict[str, Path]:
    """Every file under `folder`, named `prefix/<relative path>` (caches and symlinks left out)."""
    out: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        if "__pycache__" in path.parts or path.suffix == ".pyc" or path.is_symlink() or not path.is_file():
            continue
        out[f"{prefix}/{path.relative_to(folder).as_posix()}"] = path
    return out


def archive_bytes(files: Mapping[str, Path | bytes]) -> bytes:
    """A .tar.gz of `files` (member name -> its path or its bytes); the same files give the same bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            source = files[name]
            data = source if isinstance(source, bytes) else Path(source).read_bytes()
            info = tarfile.TarInfo(_safe_name(Path("<new>"), name))
            info.size = len(data)
            info.mode = ARCHIVE_FILE_MODE
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=GZIP_LEVEL) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def pack(out: Path, files: Mapping[str, Path | bytes]) -> str:
    """Write the archive; returns its SHA-256 (for samples.json)."""
    data = archive_bytes(files)
    Path(out).write_bytes(data)
    return hashlib.sha256(data).hexdigest()


USAGE = """usage: python -m engine.core.samples path NAME      print the sample's extracted folder
       python -m engine.core.samples pack OUT.tar.gz NAME=PATH ...   a folder goes in under NAME/, a file as NAME"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "path":
        try:
            print(sample_folder(args[1]))
        except SpecPrefillError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if len(args) < 3 or args[0] != "pack" or not all("=" in a for a in args[2:]):
        print(USAGE, file=sys.stderr)
        return 2
    files: dict[str, Path] = {}
    for spec in args[2:]:
        name, _, where = spec.partition("=")
        path = Path(where)
        files.update(files_under(path, name) if path.is_dir() else {name: path})
    print(pack(Path(args[1]), files), Path(args[1]).name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
