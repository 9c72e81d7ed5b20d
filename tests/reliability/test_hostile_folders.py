"""Hostile folders: a file swapped for a symlink or a FIFO between the scan and the read, a
.gitignore whose pattern backtracks for minutes, file names that are not UTF-8. Each loads in
bounded time, reads only the regular files it scanned, and says what it left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.ingest import load_document
from tests.fixtures.folders import tree

ROOT = Path(__file__).resolve().parents[2]
BACKTRACKING_PATTERN = "*a*a*a*a*a*a*a*a*a*a*b"  # seconds per 40-character name in a backtracking matcher

posix_only = pytest.mark.skipif(os.name != "posix", reason="needs POSIX symlinks, FIFOs and byte file names")


def labels(doc) -> list[str]:
    return [s.label for s in doc.segments]


def swap_when_read(name: str, swap: Callable[[], None]) -> Callable[[int, int, str], None]:
    """A progress callback that calls swap() just before the file `name` is read: after the scan."""

    def progress(done, total, label):
        if label == name:
            swap()

    return progress


def load_in_thread(path: Path, timeout: float, **kwargs):
    """load_document in a thread; (finished, document or exception). A read stuck in open()
    leaves the thread waiting, so the test fails instead of hanging the suite."""
    outcome: list = []

    def target():
        try:
            outcome.append(load_document(path, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the test to raise
            outcome.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(outcome), (outcome[0] if outcome else None)


def release_fifo_reader(fifo: Path) -> None:
    """A reader blocked opening a FIFO wakes when a writer opens it; it then reads end of file."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader waiting


def load_in_child(path: Path, timeout: float) -> dict:
    """Load the folder in a child process, killed at `timeout`: a matcher stuck in C code holds the
    GIL, so a thread could not be abandoned. Returns labels, warnings, text and seconds taken."""
    script = (
        "import json, sys, time\n"
        "from engine.ingest import load_document\n"
        "t0 = time.monotonic()\n"
        "doc = load_document(sys.argv[1])\n"
        "print(json.dumps({'seconds': time.monotonic() - t0, 'labels': [s.label for s in doc.segments],"
        " 'warnings': doc.warnings, 'text': doc.text}))\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script, str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"loading the folder took over {timeout:.0f} s")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def backtracking_gitignore_folder(root: Path, n_names: int = 50) -> Path:
    """A .gitignore with the backtracking pattern and `n_names` 40-character names it must be tried on."""
    tree(
        root,
        {
            ".gitignore": f"{BACKTRACKING_PATTERN}\n*.tmp\n",
            "main.py": "MAIN_MARKER = 1\n",
            "scratch.tmp": "x\n",
        },
    )
    for i in range(n_names):
        tree(root, {f"d{i:02d}/{'a' * 40}": f"value_{i} = {i}\n"})
    return root


def non_utf8_name(folder: Path, name: bytes) -> bytes:
    """The bytes path of `name` in `folder`."""
    return os.path.join(os.fsencode(folder), name)


# -- a file swapped after the scan ---------------------------------------------------------------


@posix_only
def test_a_file_swapped_for_a_symlink_after_the_scan_is_not_followed(tmp_path):
    secret = tmp_path / "outside.txt"
    secret.write_text("SECRET_OUTSIDE_THE_FOLDER\n")
    root = tree(tmp_path / "repo", {"a.py": "a = 1\n", "b.py": "b = 2\n"})

    def swap():
        os.unlink(root / "b.py")
        os.symlink(secret, root / "b.py")

    doc = load_document(root, progress=swap_when_read("b.py", swap))
    assert "SECRET_OUTSIDE_THE_FOLDER" not in doc.text
    assert labels(doc) == ["a.py"]
    assert "skipped 1 file(s): 1 symlinks (not followed)" in doc.warnings


@posix_only
def test_a_file_swapped_for_a_fifo_after_the_scan_is_skipped_without_blocking(tmp_path):
    root = tree(tmp_path / "repo", {"a.py": "a = 1\n", "b.py": "b = 2\n"})
    fifo = root / "b.py"

    def swap():
        os.unlink(fifo)
        os.mkfifo(fifo)

    try:
        finished, doc = load_in_thread(root, 10, progress=swap_when_read("b.py", swap))
    finally:
        release_fifo_reader(fifo)
    assert finished, "reading the folder blocked on a FIFO"
    if isinstance(doc, BaseException):
        raise doc
    assert labels(doc) == ["a.py"]
    assert "skipped 1 file(s): 1 not regular files" in doc.warnings


@posix_only
def test_a_gitignore_swapped_for_a_symlink_is_not_followed(tmp_path):
    outside = tmp_path / "outside-ignore"
    outside.write_text("*.py\n")
    root = tree(tmp_path / "repo", {"a.py": "a = 1\n", "notes.md": "notes\n"})
    os.symlink(outside, root / ".gitignore")
    doc = load_document(root)
    assert labels(doc) == ["a.py", "notes.md"]


# -- a .gitignore that backtracks ----------------------------------------------------------------


def test_a_backtracking_gitignore_pattern_is_rejected_and_the_folder_loads_in_seconds(tmp_path):
    root = backtracking_gitignore_folder(tmp_path / "redos")
    result = load_in_child(root, timeout=20)
    assert result["seconds"] < 10
    assert len(result["labels"]) == 52 and "main.py" in result["labels"]  # and the .gitignore
    assert "scratch.tmp" not in result["labels"]  # the file's other patterns still apply
    rejected = [w for w in result["warnings"] if BACKTRACKING_PATTERN in w]
    assert len(rejected) == 1 and ".gitignore" in rejected[0] and "not applied" in rejected[0]


def test_ordinary_gitignore_patterns_still_apply(tmp_path):
    root = tree(
        tmp_path / "repo",
        {
            ".gitignore": "*.pyc\n*.tmp\nbuild/\n**/foo/*.txt\n!keep.txt\n*-*-*.log\n",
            "main.py": "main = 1\n",
            "cache.pyc": "not really bytecode\n",
            "x.tmp": "tmp\n",
            "build/out.py": "out = 1\n",
            "src/foo/a.txt": "a\n",
            "src/foo/keep.txt": "keep\n",
            "src/bar/b.txt": "b\n",
            "run-2024-01.log": "log\n",
        },
    )
    doc = load_document(root)
    assert labels(doc) == [".gitignore", "main.py", "src/bar/b.txt", "src/foo/keep.txt"]
    assert "skipped 4 file(s): 4 ignored by .gitignore" in doc.warnings
    assert "skipped 1 folder(s): 1 ignored by .gitignore" in doc.warnings
    assert not any("not applied" in w for w in doc.warnings)


# -- file names that are not UTF-8 ---------------------------------------------------------------


@pytest.mark.skipif(
    sys.platform in ("win32", "darwin"), reason="the file system must accept any bytes in a name"
)
def test_a_file_name_that_is_not_utf8_is_loaded_under_a_printable_name(tmp_path):
    root = tree(tmp_path / "names", {"ok.py": "ok = 1\n"})
    with open(non_utf8_name(root, b"caf\xe9.py"), "wb") as fh:
        fh.write(b"DISTINCTIVE_CAFE_LINE = 1\n")
    os.mkdir(non_utf8_name(root, b"d\xff"))
    with open(non_utf8_name(root, b"d\xff/inner.py"), "wb") as fh:
        fh.write(b"INNER = 2\n")
    seen: list[str] = []

    doc = load_document(root, progress=lambda done, total, label: seen.append(label))
    assert labels(doc) == ["caf\\xe9.py", "d\\xff/inner.py", "ok.py"]
    assert "===== caf\\xe9.py =====\nDISTINCTIVE_CAFE_LINE = 1\n" in doc.text
    doc.text.encode("utf-8")
    report = {
        "segments": [{"label": s.label, "start": s.start, "end": s.end} for s in doc.segments],
        "warnings": doc.warnings,
        "progress": seen,
    }
    json.dumps(report, ensure_ascii=False).encode("utf-8")


@pytest.mark.skipif(
    sys.platform in ("win32", "darwin"), reason="the file system must accept any bytes in a name"
)
def test_a_file_name_that_is_not_utf8_in_a_run_through_the_cli(tmp_path, pair):
    target, draft = pair
    root = tree(tmp_path / "names", {"ok.py": "ok = 1\n"})
    with open(non_utf8_name(root, b"caf\xe9.py"), "wb") as fh:
        fh.write(b"CAFE = 'the green stone'\n")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "run",
            "--doc",
            str(root),
            "--question",
            "What is CAFE?",
            "--mode",
            "both",
            "--force",
            "--max-new-tokens",
            "2",
            "--json",
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--threads",
            "1",
            "--n-ctx",
            "1024",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["document"]["kind"] == "folder" and report["document"]["segments"] == 2


# -- all of it at once ---------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="needs FIFOs and byte file names")
def test_a_folder_with_every_hazard_loads_quickly_and_reports_each(tmp_path):
    root = backtracking_gitignore_folder(tmp_path / "hostile")
    with open(non_utf8_name(root, b"caf\xe9.py"), "wb") as fh:
        fh.write(b"CAFE = 1\n")
    os.mkfifo(root / "pipe")
    result = load_in_child(root, timeout=20)
    assert result["seconds"] < 10
    assert "caf\\xe9.py" in result["labels"] and "main.py" in result["labels"]
    assert "===== main.py =====\nMAIN_MARKER = 1\n" in result["text"]
    result["text"].encode("utf-8")
    warnings = result["warnings"]
    assert any("1 not regular files" in w for w in warnings), warnings
    assert any(BACKTRACKING_PATTERN in w and "not applied" in w for w in warnings), warnings
    json.dumps(warnings, ensure_ascii=False).encode("utf-8")
