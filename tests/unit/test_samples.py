"""The sample code bases ship as archives (resources/samples/code) and open as read-only folders.

engine.core.samples checks each archive's SHA-256 against samples.json, refuses unsafe members, extracts once into
the cache through a temporary folder and a rename, and hands out the folder; toolz-core is a list of toolz's members.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import stat
import tarfile
import threading
from pathlib import Path

import pytest

from engine.core import samples
from engine.core.samples import MANIFEST, SampleError, archive_bytes, sample_at, sample_folder
from engine.eval.suite import SuiteError, load_suite

REPO = Path(__file__).resolve().parents[2]
CODE = REPO / "resources" / "samples" / "code"
DEV_SUITE = REPO / "resources" / "eval" / "dev.jsonl"

TOOLZ_CORE = [
    "LICENSE.txt",
    "README-SOURCE.md",
    "README.rst",
    "toolz/dicttoolz.py",
    "toolz/recipes.py",
    "toolz/sandbox/__init__.py",
    "toolz/sandbox/core.py",
    "toolz/sandbox/parallel.py",
    "toolz/utils.py",
]
# (number of files, files that must be there) for each sample
EXPECTED = {
    "cachetools": (
        12,
        ["LICENSE", "README-SOURCE.md", "src/cachetools/__init__.py", "src/cachetools/func.pyi"],
    ),
    "structlog": (
        26,
        [
            "LICENSE-MIT",
            "LICENSE-APACHE",
            "README-SOURCE.md",
            "src/structlog/_native.py",
            "src/structlog/twisted.py",
        ],
    ),
    "toolz": (41, ["LICENSE.txt", "README-SOURCE.md", "toolz/itertoolz.py", "tlz/__init__.py", "PKG-INFO"]),
    "toolz-core": (len(TOOLZ_CORE), TOOLZ_CORE),
}


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sample-cache")


def copy_of_samples(dest: Path) -> Path:
    dest.mkdir()
    for path in CODE.iterdir():
        if path.is_file():
            shutil.copy(path, dest / path.name)
    return dest


def folder_with_archive(dest: Path, members: list[tuple[tarfile.TarInfo, bytes]], root: str = "evil") -> Path:
    """A samples folder with one hand-made archive, its true hash recorded (so only the member checks stop it)."""
    dest.mkdir()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    data = gzip.compress(raw.getvalue())
    (dest / "evil.tar.gz").write_bytes(data)
    manifest = {
        "archives": {"evil.tar.gz": hashlib.sha256(data).hexdigest()},
        "samples": {root: {"archive": "evil.tar.gz", "root": root}},
    }
    (dest / MANIFEST).write_text(json.dumps(manifest))
    return dest


def file_member(name: str) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), b"print('hi')\n"


def test_resources_hold_no_python_sources():
    assert (
        sorted(p.relative_to(REPO).as_posix() for p in (REPO / "resources" / "samples").rglob("*.py")) == []
    )


def test_the_manifest_records_each_archive_and_its_hash():
    manifest = json.loads((CODE / MANIFEST).read_text())
    on_disk = sorted(p.name for p in CODE.glob("*.tar.gz"))
    assert (
        sorted(manifest["archives"]) == on_disk == ["cachetools.tar.gz", "structlog.tar.gz", "toolz.tar.gz"]
    )
    for name, digest in manifest["archives"].items():
        assert hashlib.sha256((CODE / name).read_bytes()).hexdigest() == digest, name
    assert samples.sample_names(CODE) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_extraction_gives_the_expected_files_read_only(name, cache):
    folder = sample_folder(name, folder=CODE, cache=cache)
    assert folder.name == name and folder.is_relative_to(cache)
    got = files(folder)
    count, must = EXPECTED[name]
    assert len(got) == count and set(must) <= set(got), sorted(got)
    assert not any(n.endswith(".pyc") or "__pycache__" in n for n in got)
    paths = [folder, *folder.rglob("*")]
    assert {mode(p) for p in paths if p.is_dir()} == {0o555}
    assert {mode(p) for p in paths if p.is_file()} == {0o444}
    assert not any(p.is_symlink() for p in paths)


def test_toolz_core_is_the_listed_subset_of_toolz(cache):
    core = files(sample_folder("toolz-core", folder=CODE, cache=cache))
    toolz = files(sample_folder("toolz", folder=CODE, cache=cache))
    assert sorted(core) == TOOLZ_CORE
    listed = json.loads((CODE / MANIFEST).read_text())["samples"]["toolz-core"]["members"]
    assert sorted(m.split("/", 1)[1] for m in listed) == TOOLZ_CORE
    for rel, data in core.items():
        if rel != "README-SOURCE.md":  # its own provenance note; toolz has another
            assert toolz[rel] == data, rel
    assert core["README-SOURCE.md"] != toolz["README-SOURCE.md"]
    assert b"A small subset of **toolz 1.2.0**" in core["README-SOURCE.md"]


def test_a_second_call_reuses_the_extracted_tree(tmp_path, monkeypatch):
    first = sample_folder("cachetools", folder=CODE, cache=tmp_path)
    stamp = first.joinpath("LICENSE").stat().st_ino

    def no_second_extraction(*args):
        raise AssertionError("extracted again")

    monkeypatch.setattr(samples, "_extract", no_second_extraction)
    assert sample_folder("cachetools", folder=CODE, cache=tmp_path) == first
    assert first.joinpath("LICENSE").stat().st_ino == stamp
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [first.parent.name]


def test_the_tree_appears_only_when_whole(tmp_path, monkeypatch):
    """Files are written under a partial folder; the sample's path exists only after the rename."""
    extract = samples._extract
    seen = {}

    def watched(sample, dest):
        extract(sample, dest)
        seen["dest"] = dest
        seen["final_during"] = list(tmp_path.glob("structlog-*/structlog"))

    monkeypatch.setattr(samples, "_extract", watched)
    final = sample_folder("structlog", folder=CODE, cache=tmp_path)
    assert seen["final_during"] == []
    assert seen["dest"].parent.name.startswith(samples.PARTIAL_PREFIX) and not seen["dest"].exists()
    assert len(files(final)) == EXPECTED["structlog"][0]


def test_concurrent_callers_extract_once_and_all_see_the_whole_tree(tmp_path, monkeypatch):
    calls = []
    extract = samples._extract

    def counted(sample, dest):
        calls.append(dest)
        extract(sample, dest)

    monkeypatch.setattr(samples, "_extract", counted)
    results: list[object] = [None] * 4
    go = threading.Barrier(len(results))

    def worker(i):
        go.wait()
        folder = sample_folder("toolz-core", folder=CODE, cache=tmp_path)
        results[i] = (folder, len(files(folder)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(set(results)) == 1 and results[0][1] == len(TOOLZ_CORE)


def test_a_previous_or_partial_extraction_is_replaced(tmp_path):
    stale = tmp_path / "toolz-core-0123456789abcdef" / "toolz-core"
    partial = tmp_path / f"{samples.PARTIAL_PREFIX}toolz-core-abc123" / "toolz-core"
    other = tmp_path / "toolz-0123456789abcdef" / "toolz"  # another sample's: left alone
    for folder in (stale, partial, other):
        folder.mkdir(parents=True)
        (folder / "old.py").write_text("old\n")
        (folder / "old.py").chmod(0o444)
        folder.chmod(0o555)
    fresh = sample_folder("toolz-core", folder=CODE, cache=tmp_path)
    assert not stale.parent.exists() and not partial.parent.exists()
    assert other.joinpath("old.py").exists()
    assert sorted(files(fresh)) == TOOLZ_CORE


def test_a_tampered_archive_is_refused(tmp_path):
    folder = copy_of_samples(tmp_path / "code")
    archive = folder / "toolz.tar.gz"
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    archive.write_bytes(bytes(data))
    cache = tmp_path / "cache"
    for name in ("toolz", "toolz-core"):
        with pytest.raises(SampleError, match="fails its hash"):
            sample_folder(name, folder=folder, cache=cache)
    assert sample_folder("cachetools", folder=folder, cache=cache).is_dir()  # the others still open
    assert not list(cache.glob("toolz*"))


def test_a_tampered_archive_is_refused_after_it_was_extracted(tmp_path):
    folder = copy_of_samples(tmp_path / "code")
    sample_folder("cachetools", folder=folder, cache=tmp_path / "cache")
    archive = folder / "cachetools.tar.gz"
    data = archive.read_bytes()
    archive.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    with pytest.raises(SampleError, match="fails its hash"):
        sample_folder("cachetools", folder=folder, cache=tmp_path / "cache")


def symlink(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, b""


def hardlink(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.LNKTYPE, target
    return info, b""


def device(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.CHRTYPE
    return info, b""


UNSAFE = {
    "dot-dot": [file_member("evil/ok.py"), file_member("../evil.py")],
    "dot-dot-inside": [file_member("evil/ok.py"), file_member("evil/../../evil.py")],
    "absolute": [file_member("evil/ok.py"), file_member("/tmp/evil.py")],
    "symlink": [file_member("evil/ok.py"), symlink("evil/link", "/etc/passwd")],
    "relative-symlink": [file_member("evil/ok.py"), symlink("evil/link", "ok.py")],
    "hardlink": [file_member("evil/ok.py"), hardlink("evil/link", "evil/ok.py")],
    "device": [file_member("evil/ok.py"), device("evil/tty")],
    "duplicate": [file_member("evil/ok.py"), file_member("evil/ok.py")],
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_an_archive_with_an_unsafe_member_is_refused(case, tmp_path):
    folder = folder_with_archive(tmp_path / "code", UNSAFE[case])
    cache = tmp_path / "cache"
    with pytest.raises(SampleError, match="unsafe sample archive"):
        sample_folder("evil", folder=folder, cache=cache)
    assert not (tmp_path / "evil.py").exists()
    assert not [p for p in cache.iterdir() if p.is_dir()]  # no extraction, no partial left


def test_a_safe_hand_made_archive_opens(tmp_path):
    """The unsafe cases above fail on their bad member, not on the way the archive is made."""
    folder = folder_with_archive(tmp_path / "code", [file_member("evil/ok.py"), file_member("evil/sub/b.py")])
    assert sorted(files(sample_folder("evil", folder=folder, cache=tmp_path / "cache"))) == [
        "ok.py",
        "sub/b.py",
    ]


def test_an_unknown_sample_is_named_in_the_error(tmp_path):
    with pytest.raises(SampleError, match="no sample code base named 'numpy'.*toolz-core"):
        sample_folder("numpy", folder=CODE, cache=tmp_path)


@pytest.mark.parametrize("name", ["cachetools.tar.gz", "structlog.tar.gz", "toolz.tar.gz"])
def test_repacking_an_archive_gives_the_same_bytes(name):
    shipped = (CODE / name).read_bytes()
    with tarfile.open(CODE / name) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        assert all(m.mtime == 0 and m.uid == m.gid == 0 and m.isreg() for m in tar.getmembers())
    assert list(members) == sorted(members)
    assert shipped[4:8] == b"\0\0\0\0"  # gzip mtime 0
    again = archive_bytes(members)
    assert gzip.decompress(again) == gzip.decompress(shipped)
    assert archive_bytes(members) == again


def test_sample_at_maps_only_sample_paths(tmp_path):
    assert sample_at(CODE / "toolz-core", cache=tmp_path) == sample_folder(
        "toolz-core", folder=CODE, cache=tmp_path
    )
    assert sample_at(CODE / "no-such-sample", cache=tmp_path) is None
    assert sample_at(REPO / "resources" / "samples" / "docs" / "xfig-howto.pdf", cache=tmp_path) is None
    assert sample_at(tmp_path / "toolz-core", cache=tmp_path) is None  # no samples.json beside it


def test_the_suites_open_code_docs_through_the_helper(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cases = load_suite(DEV_SUITE)
    code = {c.doc for c in cases if "toolz" in c.id}
    assert code == {sample_folder("toolz-core")}
    (doc,) = code
    assert doc.is_relative_to(tmp_path / "xdg") and sorted(files(doc)) == TOOLZ_CORE
    assert all(c.doc.exists() for c in cases)


def test_a_suite_naming_a_tampered_sample_fails_on_its_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = copy_of_samples(tmp_path / "code")
    (folder / "structlog.tar.gz").write_bytes(b"not an archive")
    suite = tmp_path / "suite.jsonl"
    suite.write_text(
        '{"id": "a", "doc": "code/toolz-core", "question": "q?"}\n'
        '{"id": "b", "doc": "code/structlog", "question": "q?"}\n'
    )
    with pytest.raises(SuiteError, match=r"suite.jsonl:2: sample archive .*structlog.tar.gz fails its hash"):
        load_suite(suite)
    suite.write_text('{"id": "a", "doc": "code/numpy", "question": "q?"}\n')
    with pytest.raises(SuiteError, match="document not found: code/numpy"):
        load_suite(suite)
