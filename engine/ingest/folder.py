"""Code-folder ingestion: every text file under a header line, in sorted order."""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import pathspec

from engine.core.cancel import CancelToken
from engine.core.errors import IngestError
from engine.ingest._common import (
    SNIFF_BYTES,
    FolderLimits,
    Progress,
    clean_text,
    decode_bytes,
    has_binary_extension,
    human_bytes,
    looks_binary,
    name_list,
    printable_name,
    token,
)
from engine.ingest.document import Document, Segment

__all__ = ["FolderLimits", "load_folder", "file_header"]

# Folders that are never source: version control, caches, dependencies, virtualenvs.
SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", "_darcs", "CVS", ".jj",
        "__pycache__", "node_modules", ".venv", ".tox", ".nox", ".eggs",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis",
    }
)  # fmt: skip

MAX_GITIGNORE_BYTES = 256 * 1024
# A .gitignore pattern is matched by backtracking: each `*` in one name, and each `**` across the
# path, multiplies the work by the length it spans. Past these counts one crafted pattern takes
# seconds to minutes per file name, so such a pattern is not applied (and the warnings say so).
MAX_STARS_IN_ONE_NAME = 3
MAX_ANY_DEPTH_WILDCARDS = 3
SHOWN_PATTERN_CHARS = 60

# A file is opened without following a symlink (one swapped in after the scan) and without waiting
# for a writer (a FIFO swapped in); fstat on the descriptor then tells what was really opened.
OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
# What open() with O_NOFOLLOW raises when the name is a symlink (EMLINK on FreeBSD).
SYMLINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})
LISTED_WHOLE = 10_000  # a folder with up to this many entries is always listed (and sorted) whole

# Reasons, as they read in the warnings.
R_IGNORED = "ignored by .gitignore"
R_BINARY = "binary"
R_TOO_BIG = "over the per-file cap"
R_EMPTY = "empty"
R_SYMLINK = "symlinks (not followed)"
R_SPECIAL = "not regular files"
R_UNREADABLE = "unreadable"
R_TOOL_DIR = "tool or cache folders"
R_VENV = "virtual environments"


def file_header(rel: str) -> str:
    return f"===== {rel} =====\n"


@dataclass(frozen=True)
class _Candidate:
    rel: str  # the name as the file system gives it (not UTF-8 bytes held as surrogate escapes)
    abs: Path
    size: int

    @property
    def label(self) -> str:
        return printable_name(self.rel)


class _Skipped(Exception):
    """A file that is not read, with the reason as the warnings word it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _open_without_following(path, flags: int) -> int:
    """An opener for open(): the flags of OPEN_FLAGS instead of the ones open() picks."""
    return os.open(path, OPEN_FLAGS)


def _read_regular_file(path: Path, limit: int) -> bytes:
    """Up to `limit` bytes of the regular file at `path`; raises _Skipped for anything else.
    The checks are on the opened descriptor, so a name swapped after the scan cannot mislead them."""
    try:
        with open(path, "rb", opener=_open_without_following) as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise _Skipped(R_SPECIAL)
            return fh.read(limit)
    except OSError as e:
        raise _Skipped(R_SYMLINK if e.errno in SYMLINK_ERRNOS else R_UNREADABLE) from e


def _backtracks(line: str) -> bool:
    """True for a .gitignore line whose pattern has too many wildcards to match in bounded time."""
    pattern = line.strip()
    if not pattern or pattern.startswith("#"):
        return False
    pattern = pattern.removeprefix("!").replace("\\*", "")  # an escaped star is a plain character
    names = [name for name in pattern.strip("/").split("/") if name]
    floating = "/" not in pattern.rstrip("/")  # matches at any depth: an implied leading **/
    any_depth = sum(name == "**" for name in names) + floating
    stars = max((name.count("*") for name in names if name != "**"), default=0)
    return stars > MAX_STARS_IN_ONE_NAME or any_depth > MAX_ANY_DEPTH_WILDCARDS


def _shown_pattern(line: str) -> str:
    pattern = clean_text(line.strip())
    if len(pattern) > SHOWN_PATTERN_CHARS:
        pattern = pattern[:SHOWN_PATTERN_CHARS] + "..."
    return f"'{pattern}'"


class _Ignore:
    """The .gitignore files that apply in one directory, root first."""

    def __init__(self, specs: tuple[tuple[str, object], ...] = ()) -> None:
        self.specs = specs  # (directory relative to the root, "" for the root; GitIgnoreSpec)

    def with_file(self, base: str, gitignore: Path, rejected: list[str]) -> _Ignore:
        """These rules and the ones of `gitignore`, found in folder `base`. The patterns too costly
        to match are left out and appended to `rejected`, each with the file that holds it."""
        try:
            raw = _read_regular_file(gitignore, MAX_GITIGNORE_BYTES)
        except _Skipped:
            return self
        lines = raw.decode("utf-8", errors="replace").splitlines()
        where = printable_name(f"{base}/.gitignore" if base else ".gitignore")
        costly = [_backtracks(line) for line in lines]
        rejected.extend(f"{_shown_pattern(line)} in {where}" for line, bad in zip(lines, costly) if bad)
        lines = [line for line, bad in zip(lines, costly) if not bad]
        try:
            spec = pathspec.GitIgnoreSpec.from_lines(lines)
        except Exception:  # a malformed pattern: ignore the file rather than fail
            return self
        return _Ignore(self.specs + ((base, spec),))

    def ignored(self, rel: str, is_dir: bool) -> bool:
        # The deepest .gitignore that has an opinion wins; within a file the last
        # matching pattern wins (pathspec's check_file does that part).
        for base, spec in reversed(self.specs):
            sub = rel[len(base) + 1 :] if base else rel
            result = spec.check_file(sub + "/" if is_dir else sub)
            if result.include is not None:
                return bool(result.include)
        return False


def load_folder(
    path: Path,
    *,
    cancel: CancelToken | None = None,
    progress: Progress | None = None,
    limits: FolderLimits | None = None,
) -> Document:
    """Read a code folder. Raises IngestError when it holds no readable text file."""
    cancel = token(cancel)
    limits = limits or FolderLimits()
    root = Path(path)

    skipped: Counter[str] = Counter()
    skipped_dirs: Counter[str] = Counter()
    tool_dirs: list[str] = []
    rejected_patterns: list[str] = []
    candidates, n_entries, scan_cut = _scan(
        root, limits, cancel, skipped, skipped_dirs, tool_dirs, rejected_patterns
    )
    candidates.sort(key=lambda c: c.rel)

    parts: list[str] = []
    segments: list[Segment] = []
    not_utf8: list[str] = []
    pos = 0
    total_bytes = 0
    over_count = over_bytes = 0
    for i, cand in enumerate(candidates):
        cancel.raise_if_cancelled()
        if progress is not None:
            progress(i + 1, len(candidates), cand.label)
        if len(segments) >= limits.max_files:
            over_count += 1
            continue
        if over_bytes or total_bytes + cand.size > limits.max_total_bytes:
            over_bytes += 1
            continue
        try:
            data = _read_regular_file(cand.abs, limits.max_file_bytes + 1)
        except _Skipped as skip:
            skipped[skip.reason] += 1
            continue
        if len(data) > limits.max_file_bytes:  # it grew since the scan
            skipped[R_TOO_BIG] += 1
            continue
        if looks_binary(data[:SNIFF_BYTES]):
            skipped[R_BINARY] += 1
            continue
        text, clean = decode_bytes(data)
        text = clean_text(text)
        if not text.strip():
            skipped[R_EMPTY] += 1
            continue
        if not clean:
            not_utf8.append(cand.label)
        if not text.endswith("\n"):
            text += "\n"
        total_bytes += len(data)
        if parts:
            parts.append("\n")
            pos += 1
        chunk = file_header(cand.label) + text
        parts.append(chunk)
        segments.append(Segment(cand.label, "file", pos, pos + len(chunk)))
        pos += len(chunk)

    if not segments:
        if n_entries == 0:
            raise IngestError(f"{root} is an empty folder")
        why = "; ".join(
            filter(
                None,
                [
                    skipped and f"{sum(skipped.values())} file(s): {_reasons(skipped)}",
                    skipped_dirs and f"{sum(skipped_dirs.values())} folder(s): {_reasons(skipped_dirs)}",
                    over_bytes and f"{over_bytes} file(s) over the total size cap",
                ],
            )
        )
        raise IngestError(
            f"{root} holds no readable text files"
            + (f" (skipped: {why})" if why else "")
            + (f"; scanning stopped after {limits.max_entries} entries" if scan_cut else "")
        )

    warnings: list[str] = []
    if scan_cut:
        warnings.append(
            f"stopped scanning after {limits.max_entries} entries; the rest of the folder was not looked at"
        )
    if over_count:
        warnings.append(
            f"file cap reached: {over_count} more file(s) were not read (limit {limits.max_files} files)"
        )
    if over_bytes:
        warnings.append(
            f"size cap reached: {over_bytes} more file(s) were not read "
            f"(limit {human_bytes(limits.max_total_bytes)} in all)"
        )
    if skipped:
        n = sum(skipped.values())
        text_reasons = _reasons(skipped).replace(
            R_TOO_BIG, f"over the per-file cap of {human_bytes(limits.max_file_bytes)}"
        )
        warnings.append(f"skipped {n} file(s): {text_reasons}")
    if skipped_dirs:
        n = sum(skipped_dirs.values())
        dir_reasons = _reasons(skipped_dirs).replace(
            R_TOOL_DIR, f"{R_TOOL_DIR} ({name_list(sorted(set(tool_dirs)))})"
        )
        warnings.append(f"skipped {n} folder(s): {dir_reasons}")
    if not_utf8:
        warnings.append(
            f"{len(not_utf8)} file(s) not valid UTF-8, decoded with replacement: {name_list(not_utf8)}"
        )
    if rejected_patterns:
        warnings.append(
            f"{len(rejected_patterns)} .gitignore pattern(s) not applied, too many wildcards to match "
            f"in bounded time: {name_list(rejected_patterns)}"
        )
    return Document(path=root, kind="folder", text="".join(parts), segments=segments, warnings=warnings)


def _reasons(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def _scan(
    root: Path,
    limits: FolderLimits,
    cancel: CancelToken,
    skipped: Counter[str],
    skipped_dirs: Counter[str],
    tool_dirs: list[str],
    rejected_patterns: list[str],
) -> tuple[list[_Candidate], int, bool]:
    """Walk the folder without following symlinks. Returns candidates, entries seen, cut."""
    candidates: list[_Candidate] = []
    n_entries = 0
    stack: list[tuple[Path, str, _Ignore]] = [(root, "", _Ignore())]
    while stack:
        cancel.raise_if_cancelled()
        dir_abs, dir_rel, ignore = stack.pop()
        try:
            with os.scandir(dir_abs) as it:
                entries = sorted(
                    islice(it, _listing_cap(limits.max_entries - n_entries)), key=lambda e: e.name
                )
        except PermissionError as e:
            if not dir_rel:
                raise IngestError(f"cannot read {root}: permission denied") from e
            skipped_dirs[R_UNREADABLE] += 1
            continue
        except OSError as e:
            if not dir_rel:
                raise IngestError(f"cannot read {root}: {e.strerror or e}") from e
            skipped_dirs[R_UNREADABLE] += 1
            continue

        for entry in entries:
            if entry.name == ".gitignore" and _is_plain_file(entry):
                ignore = ignore.with_file(dir_rel, Path(entry.path), rejected_patterns)
                break

        subdirs: list[tuple[Path, str, _Ignore]] = []
        for entry in entries:
            n_entries += 1
            if n_entries > limits.max_entries:
                return candidates, n_entries - 1, True
            rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
            try:
                if entry.is_symlink():
                    if _is_dir_target(entry):
                        skipped_dirs[R_SYMLINK] += 1
                    else:
                        skipped[R_SYMLINK] += 1
                    continue
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in SKIP_DIRS:
                        skipped_dirs[R_TOOL_DIR] += 1
                        tool_dirs.append(entry.name)
                    elif ignore.ignored(rel, is_dir=True):
                        skipped_dirs[R_IGNORED] += 1
                    elif os.path.isfile(os.path.join(entry.path, "pyvenv.cfg")):
                        skipped_dirs[R_VENV] += 1
                    else:
                        subdirs.append((Path(entry.path), rel, ignore))
                    continue
                if not entry.is_file(follow_symlinks=False):
                    skipped[R_SPECIAL] += 1
                    continue
                if ignore.ignored(rel, is_dir=False):
                    skipped[R_IGNORED] += 1
                    continue
                if has_binary_extension(entry.name):
                    skipped[R_BINARY] += 1
                    continue
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:
                skipped[R_UNREADABLE] += 1
                continue
            if size == 0:
                skipped[R_EMPTY] += 1
            elif size > limits.max_file_bytes:
                skipped[R_TOO_BIG] += 1
            else:
                candidates.append(_Candidate(rel, Path(entry.path), size))
        stack.extend(reversed(subdirs))
    return candidates, n_entries, False


def _listing_cap(entries_left: int) -> int:
    """How many names to list from one folder: a folder of millions stops at the entry cap, fast.
    Smaller folders are listed whole, so the files kept are the first ones by name."""
    return max(entries_left + 1, LISTED_WHOLE)


def _is_plain_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def _is_dir_target(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=True)
    except OSError:
        return False
