"""Code-folder ingestion: every text file under a header line, in sorted order."""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
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


@dataclass
class _Tally:
    """What was left out of the document, and why: its warnings (or the error) are made of it."""

    skipped: Counter[str] = field(default_factory=Counter)  # files, by reason
    skipped_dirs: Counter[str] = field(default_factory=Counter)  # folders, by reason
    tool_dirs: list[str] = field(default_factory=list)  # the names of the tool and cache folders
    rejected_patterns: list[str] = field(default_factory=list)  # .gitignore patterns too costly to match
    not_utf8: list[str] = field(default_factory=list)  # files decoded with replacement
    over_count: int = 0  # files not read past the file cap
    over_bytes: int = 0  # files not read past the total size cap
    scan_cut: bool = False  # the entry cap stopped the scan


@dataclass
class _Text:
    """The files read so far: each under its header line, one segment each, a blank line between."""

    parts: list[str] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    pos: int = 0  # the length of the text so far
    total_bytes: int = 0  # the files' size on disk

    def add(self, label: str, text: str, n_bytes: int) -> None:
        self.total_bytes += n_bytes
        if self.parts:
            self.parts.append("\n")
            self.pos += 1
        chunk = file_header(label) + text
        self.parts.append(chunk)
        self.segments.append(Segment(label, "file", self.pos, self.pos + len(chunk)))
        self.pos += len(chunk)


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
    tally = _Tally()
    scan = _Scan(root, limits, cancel, tally)
    candidates = sorted(scan.run(), key=lambda c: c.rel)
    files = _read_files(candidates, limits, cancel, progress, tally)
    if not files.segments:
        raise _nothing_readable(root, scan.n_entries, limits, tally)
    text, warnings = "".join(files.parts), _warnings(limits, tally)
    return Document(path=root, kind="folder", text=text, segments=files.segments, warnings=warnings)


def _read_files(
    candidates: list[_Candidate],
    limits: FolderLimits,
    cancel: CancelToken,
    progress: Progress | None,
    tally: _Tally,
) -> _Text:
    """The candidates' text in their order, up to the file and total size caps; the rest is tallied."""
    text = _Text()
    for i, cand in enumerate(candidates):
        cancel.raise_if_cancelled()
        if progress is not None:
            progress(i + 1, len(candidates), cand.label)
        if len(text.segments) >= limits.max_files:
            tally.over_count += 1
            continue
        if tally.over_bytes or text.total_bytes + cand.size > limits.max_total_bytes:
            tally.over_bytes += 1
            continue
        try:
            n_bytes, file_text = _file_text(cand, limits.max_file_bytes, tally)
        except _Skipped as skip:
            tally.skipped[skip.reason] += 1
            continue
        text.add(cand.label, file_text, n_bytes)
    return text


def _file_text(cand: _Candidate, max_bytes: int, tally: _Tally) -> tuple[int, str]:
    """The file's size and its text, ending with a newline; raises _Skipped for a file not to read
    (one not valid UTF-8 is read with replacement, and tallied)."""
    data = _read_regular_file(cand.abs, max_bytes + 1)
    if len(data) > max_bytes:  # it grew since the scan
        raise _Skipped(R_TOO_BIG)
    if looks_binary(data[:SNIFF_BYTES]):
        raise _Skipped(R_BINARY)
    text, clean = decode_bytes(data)
    text = clean_text(text)
    if not text.strip():
        raise _Skipped(R_EMPTY)
    if not clean:
        tally.not_utf8.append(cand.label)
    return len(data), text if text.endswith("\n") else text + "\n"


def _nothing_readable(root: Path, n_entries: int, limits: FolderLimits, tally: _Tally) -> IngestError:
    """The error for a folder that gave no text: empty, or why each thing in it was left out."""
    if n_entries == 0:
        return IngestError(f"{root} is an empty folder")
    skipped, skipped_dirs = tally.skipped, tally.skipped_dirs
    why = "; ".join(
        filter(
            None,
            [
                skipped and f"{sum(skipped.values())} file(s): {_reasons(skipped)}",
                skipped_dirs and f"{sum(skipped_dirs.values())} folder(s): {_reasons(skipped_dirs)}",
                tally.over_bytes and f"{tally.over_bytes} file(s) over the total size cap",
            ],
        )
    )
    return IngestError(
        f"{root} holds no readable text files"
        + (f" (skipped: {why})" if why else "")
        + (f"; scanning stopped after {limits.max_entries} entries" if tally.scan_cut else "")
    )


def _warnings(limits: FolderLimits, tally: _Tally) -> list[str]:
    """A line for each cap that left files out, the files and folders skipped, the files not valid
    UTF-8 and the .gitignore patterns not applied."""
    t, warnings = tally, []
    if t.scan_cut:
        warnings.append(
            f"stopped scanning after {limits.max_entries} entries; the rest of the folder was not looked at"
        )
    if t.over_count:
        warnings.append(
            f"file cap reached: {t.over_count} more file(s) were not read (limit {limits.max_files} files)"
        )
    if t.over_bytes:
        warnings.append(
            f"size cap reached: {t.over_bytes} more file(s) were not read "
            f"(limit {human_bytes(limits.max_total_bytes)} in all)"
        )
    if t.skipped:
        too_big = f"over the per-file cap of {human_bytes(limits.max_file_bytes)}"
        reasons = _reasons(t.skipped).replace(R_TOO_BIG, too_big)
        warnings.append(f"skipped {sum(t.skipped.values())} file(s): {reasons}")
    if t.skipped_dirs:
        tools = f"{R_TOOL_DIR} ({name_list(sorted(set(t.tool_dirs)))})"
        reasons = _reasons(t.skipped_dirs).replace(R_TOOL_DIR, tools)
        warnings.append(f"skipped {sum(t.skipped_dirs.values())} folder(s): {reasons}")
    if t.not_utf8:
        warnings.append(
            f"{len(t.not_utf8)} file(s) not valid UTF-8, decoded with replacement: {name_list(t.not_utf8)}"
        )
    if t.rejected_patterns:
        warnings.append(
            f"{len(t.rejected_patterns)} .gitignore pattern(s) not applied, too many wildcards to match "
            f"in bounded time: {name_list(t.rejected_patterns)}"
        )
    return warnings


def _reasons(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


_Folder = tuple[Path, str, _Ignore]  # a folder to walk: its path, its name relative to the root, its rules


class _Scan:
    """One walk of the folder, without following symlinks: the files to read, the entries seen
    (`n_entries`), and in the tally what was left out and whether the entry cap cut the walk."""

    def __init__(self, root: Path, limits: FolderLimits, cancel: CancelToken, tally: _Tally) -> None:
        self.root, self.limits, self.cancel, self.tally = root, limits, cancel, tally
        self.candidates: list[_Candidate] = []
        self.n_entries = 0

    def run(self) -> list[_Candidate]:
        stack: list[_Folder] = [(self.root, "", _Ignore())]
        while stack and not self.tally.scan_cut:
            self.cancel.raise_if_cancelled()
            stack.extend(reversed(self._walk_one(*stack.pop())))
        return self.candidates

    def _walk_one(self, dir_abs: Path, dir_rel: str, ignore: _Ignore) -> list[_Folder]:
        """Each entry of one folder becomes a candidate, a tallied skip or a folder to walk (returned)."""
        entries = self._listing(dir_abs, dir_rel)
        ignore = self._with_gitignore(entries, dir_rel, ignore)
        subdirs: list[_Folder] = []
        for entry in entries:
            self.n_entries += 1
            if self.n_entries > self.limits.max_entries:
                self.n_entries -= 1
                self.tally.scan_cut = True
                return []
            rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
            try:
                if entry.is_symlink():
                    counter = self.tally.skipped_dirs if _is_dir_target(entry) else self.tally.skipped
                    counter[R_SYMLINK] += 1
                elif entry.is_dir(follow_symlinks=False):
                    subdirs += self._folder_to_walk(entry, rel, ignore)
                else:
                    self._take_file(entry, rel, ignore)
            except OSError:
                self.tally.skipped[R_UNREADABLE] += 1
        return subdirs

    def _listing(self, dir_abs: Path, dir_rel: str) -> list[os.DirEntry]:
        """The folder's entries by name; none for an unreadable subfolder (tallied). The root unreadable
        is an IngestError."""
        try:
            with os.scandir(dir_abs) as it:
                listed = islice(it, _listing_cap(self.limits.max_entries - self.n_entries))
                return sorted(listed, key=lambda e: e.name)
        except OSError as e:
            if not dir_rel:
                why = "permission denied" if isinstance(e, PermissionError) else e.strerror or e
                raise IngestError(f"cannot read {self.root}: {why}") from e
            self.tally.skipped_dirs[R_UNREADABLE] += 1
            return []

    def _with_gitignore(self, entries: list[os.DirEntry], dir_rel: str, ignore: _Ignore) -> _Ignore:
        """The rules for this folder: the parent's, and its own .gitignore's when it has one."""
        for entry in entries:
            if entry.name == ".gitignore" and _is_plain_file(entry):
                return ignore.with_file(dir_rel, Path(entry.path), self.tally.rejected_patterns)
        return ignore

    def _folder_to_walk(self, entry: os.DirEntry, rel: str, ignore: _Ignore) -> list[_Folder]:
        """The subfolder to walk, or none when it is a tool folder, ignored or a virtual environment."""
        if entry.name in SKIP_DIRS:
            self.tally.skipped_dirs[R_TOOL_DIR] += 1
            self.tally.tool_dirs.append(entry.name)
        elif ignore.ignored(rel, is_dir=True):
            self.tally.skipped_dirs[R_IGNORED] += 1
        elif os.path.isfile(os.path.join(entry.path, "pyvenv.cfg")):
            self.tally.skipped_dirs[R_VENV] += 1
        else:
            return [(Path(entry.path), rel, ignore)]
        return []

    def _take_file(self, entry: os.DirEntry, rel: str, ignore: _Ignore) -> None:
        """A file to read becomes a candidate; any other entry is tallied with the reason it is not."""
        skipped = self.tally.skipped
        if not entry.is_file(follow_symlinks=False):
            skipped[R_SPECIAL] += 1
        elif ignore.ignored(rel, is_dir=False):
            skipped[R_IGNORED] += 1
        elif has_binary_extension(entry.name):
            skipped[R_BINARY] += 1
        else:
            size = entry.stat(follow_symlinks=False).st_size
            if size == 0:
                skipped[R_EMPTY] += 1
            elif size > self.limits.max_file_bytes:
                skipped[R_TOO_BIG] += 1
            else:
                self.candidates.append(_Candidate(rel, Path(entry.path), size))


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
