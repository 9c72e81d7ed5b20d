"""Bad folders: empty, only binaries, symlink loops, 100,000 files, bad encodings, huge files,
missing or forbidden paths. Walks are bounded and every skip is reported."""

from __future__ import annotations

import builtins
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from engine.core.errors import IngestError
from engine.ingest import FolderLimits, load_document
from engine.ingest import folder as folder_module
from tests.fixtures.folders import tree
from tests.reliability.support import seconds_to_stop_reading

N_FILES = 100_000


def refused(path: Path) -> str:
    with pytest.raises(IngestError) as err:
        load_document(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def labels(doc) -> list[str]:
    return [s.label for s in doc.segments]


def test_an_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    assert "is an empty folder" in refused(tmp_path / "empty")


def test_a_folder_of_only_binaries_says_what_was_skipped(tmp_path):
    root = tree(
        tmp_path / "bin", {"app.exe": b"MZ\x00\x01", "lib/x.so": b"\x7fELF\x00", "blob": b"\x00" * 64}
    )
    message = refused(root)
    assert "holds no readable text files" in message and "3 binary" in message


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks on this system")
def test_a_symlink_loop_ends_at_once(tmp_path):
    root = tree(tmp_path / "loop", {"src/main.py": "print('hi')\n"})
    os.symlink(root, root / "src" / "again")
    os.symlink(root / "src", root / "src" / "self")
    started = time.monotonic()
    doc = load_document(root)
    assert time.monotonic() - started < 1.0
    assert labels(doc) == ["src/main.py"]
    assert "skipped 2 folder(s): 2 symlinks (not followed)" in doc.warnings


def test_non_utf8_files_are_decoded_with_a_warning_naming_them(tmp_path):
    root = tree(
        tmp_path / "enc",
        {
            "ok.py": "x = 1\n",
            "latin.txt": "caf\xe9 cr\xe8me\n".encode("latin-1"),
            "cp1252.txt": "\u201cquoted\u201d\n".encode("cp1252"),
        },
    )
    doc = load_document(root)
    assert labels(doc) == ["cp1252.txt", "latin.txt", "ok.py"]
    assert "\ufffd" in doc.text
    assert any(
        "2 file(s) not valid UTF-8" in w and "latin.txt" in w and "cp1252.txt" in w for w in doc.warnings
    )


def test_files_over_the_caps_are_skipped_and_counted(tmp_path):
    root = tree(
        tmp_path / "big",
        {"a.py": "a = 1\n", "huge.log": "x" * 5000, **{f"m{i}.txt": "y" * 900 for i in range(4)}},
    )
    doc = load_document(root, limits=FolderLimits(max_file_bytes=4096, max_total_bytes=2000))
    assert labels(doc) == ["a.py", "m0.txt", "m1.txt"]
    assert any("over the per-file cap of 4 KB" in w for w in doc.warnings)
    assert any("size cap reached: 2 more file(s)" in w for w in doc.warnings)


def test_a_missing_path(tmp_path):
    assert "no such file or folder" in refused(tmp_path / "gone" / "repo")


# -- 100,000 files ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crowded(tmp_path_factory) -> Path:
    """One folder holding 100,000 small files (a home directory's worth of clutter).

    In memory (/dev/shm) where there is one: some disks take minutes to delete 100,000 files."""
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else tmp_path_factory.getbasetemp()
    root = Path(tempfile.mkdtemp(prefix="crowded-", dir=parent))
    for i in range(N_FILES):
        with open(root / f"f{i:06d}.txt", "wb") as fh:
            fh.write(b"x\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_100000_files_stop_at_the_file_cap_and_say_so(crowded):
    started = time.monotonic()
    doc = load_document(crowded)
    assert time.monotonic() - started < 10.0
    assert len(doc.segments) == FolderLimits().max_files
    assert labels(doc)[:2] == ["f000000.txt", "f000001.txt"]  # the first ones by name
    assert f"file cap reached: {N_FILES - 5000} more file(s) were not read (limit 5000 files)" in doc.warnings


def test_the_walk_stops_at_the_entry_cap_without_listing_the_rest(crowded):
    started = time.monotonic()
    doc = load_document(crowded, limits=FolderLimits(max_entries=20_000, max_files=100))
    assert time.monotonic() - started < 2.0
    assert len(doc.segments) == 100
    assert any("stopped scanning after 20000 entries" in w for w in doc.warnings)


def test_cancel_while_reading_100000_files(crowded):
    assert seconds_to_stop_reading(crowded, cancel_at=1000) < 1.0


# -- no permission ------------------------------------------------------------------------


def deny(monkeypatch, *paths: Path) -> None:
    """Make `paths` unreadable as they are for a user without the rights (tests may run as root,
    whom chmod does not stop): access checks fail and listing or opening raises EACCES."""
    denied = {str(p) for p in paths}

    def access(path, mode, **kwargs):
        return str(path) not in denied and real_access(path, mode, **kwargs)

    def scandir(path="."):
        if str(path) in denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    def open_(file, *args, **kwargs):
        if str(file) in denied:
            raise PermissionError(13, "Permission denied", str(file))
        return builtins.open(file, *args, **kwargs)

    real_access, real_scandir = os.access, os.scandir
    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(folder_module, "open", open_, raising=False)


def test_a_folder_without_read_permission(tmp_path, monkeypatch):
    root = tree(tmp_path / "private", {"a.py": "a = 1\n"})
    deny(monkeypatch, root)
    assert "permission denied" in refused(root)


def test_a_file_without_read_permission(tmp_path, monkeypatch):
    path = tmp_path / "secret.txt"
    path.write_text("classified")
    deny(monkeypatch, path)
    assert "permission denied" in refused(path)


def test_unreadable_parts_of_a_folder_are_skipped_and_counted(tmp_path, monkeypatch):
    root = tree(tmp_path / "repo", {"ok.py": "ok = 1\n", "locked/inner.py": "x = 1\n", "key.txt": "k\n"})
    deny(monkeypatch, root / "locked", root / "key.txt")
    doc = load_document(root)
    assert labels(doc) == ["ok.py"]
    assert "skipped 1 file(s): 1 unreadable" in doc.warnings
    assert "skipped 1 folder(s): 1 unreadable" in doc.warnings


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads every file whatever its mode")
def test_a_folder_with_mode_000(tmp_path):
    root = tree(tmp_path / "closed", {"a.py": "a = 1\n"})
    root.chmod(0)
    try:
        assert "permission denied" in refused(root)
    finally:
        root.chmod(0o755)


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv (as a user, the test above denies for real)",
)
def test_a_real_permission_denial_through_the_cli(tmp_path):
    """Root without CAP_DAC_OVERRIDE obeys file modes: the CLI meets a real EACCES."""
    path = tmp_path / "secret.txt"
    path.write_text("classified")
    path.chmod(0)
    command = [
        "setpriv",
        "--bounding-set=-dac_override,-dac_read_search",
        sys.executable,
        "-m",
        "engine.cli",
        "run",
        "--doc",
        str(path),
        "--question",
        "q?",
    ]
    proc = subprocess.run(
        command, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=60
    )
    assert (
        proc.returncode == 2
        and proc.stderr.strip() == f"specprefill: error: cannot read {path}: permission denied"
    )
