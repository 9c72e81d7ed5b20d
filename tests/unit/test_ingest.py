"""Ingestion: PDFs, text files and code folders become Documents with a segment map."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled, IngestError
from engine.core.samples import sample_folder
from engine.ingest import FolderLimits, IngestLimits, load_document
from engine.ingest._common import decode_bytes, page_ranges
from engine.ingest.folder import file_header
from tests.fixtures.folders import tree
from tests.fixtures.pdfs import encrypt_pdf, make_pdf, write_pdf

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "resources" / "samples" / "docs"


# --------------------------------------------------------------------------- helpers


def labels(doc) -> list[str]:
    return [s.label for s in doc.segments]


def joined(warnings: list[str]) -> str:
    return " | ".join(warnings)


# --------------------------------------------------------------------------- PDF


PAGES = ["Alpha page one\nsecond line of one", "Bravo page two", "Charlie page three (last)"]


def test_pdf_page_map(tmp_path):
    seen = []
    doc = load_document(
        write_pdf(tmp_path / "doc.pdf", PAGES), progress=lambda d, t, lbl: seen.append((d, t, lbl))
    )
    assert doc.kind == "pdf"
    assert doc.warnings == []
    assert labels(doc) == ["page 1", "page 2", "page 3"]
    assert all(s.kind == "page" for s in doc.segments)
    # each page's span holds exactly that page's text, pages joined by a blank line
    for seg, expected in zip(doc.segments, PAGES):
        assert doc.text[seg.start : seg.end] == expected
    assert doc.text == "\n\n".join(PAGES)
    assert doc.segment_at(doc.text.index("Bravo")).label == "page 2"
    assert doc.segment_at(doc.text.index("(last)")).label == "page 3"
    assert doc.segment_at(0).label == "page 1"
    assert doc.segment_at(doc.segments[0].end) is None  # the separator belongs to no page
    assert doc.segment_at(len(doc.text)) is None
    assert seen == [(1, 3, "page 1"), (2, 3, "page 2"), (3, 3, "page 3")]


def test_pdf_pages_without_text_are_reported(tmp_path):
    pages = ["first", None, "third", None, None, None, "seventh"]
    doc = load_document(write_pdf(tmp_path / "gaps.pdf", pages))
    assert labels(doc) == ["page 1", "page 3", "page 7"]
    assert doc.warnings == ["pages with no text: 2, 4-6"]
    assert doc.segment_at(doc.text.index("seventh")).label == "page 7"


def test_pdf_with_no_text_at_all(tmp_path):
    path = write_pdf(tmp_path / "scan.pdf", [None, None, None])
    with pytest.raises(IngestError) as e:
        load_document(path)
    msg = str(e.value)
    assert "no extractable text" in msg and "OCR" in msg and str(path) in msg
    assert "\n" not in msg


@pytest.mark.parametrize("password", ["secret", "pässwörd"])
def test_encrypted_pdf_right_password(tmp_path, password):
    path = encrypt_pdf(make_pdf(PAGES), tmp_path / "enc.pdf", user=password)
    doc = load_document(path, password=password)
    assert doc.text == "\n\n".join(PAGES)
    assert labels(doc) == ["page 1", "page 2", "page 3"]


def test_encrypted_pdf_without_password(tmp_path):
    path = encrypt_pdf(make_pdf(PAGES), tmp_path / "enc.pdf", user="secret")
    with pytest.raises(IngestError, match="encrypted.*password is needed") as e:
        load_document(path)
    assert str(path) in str(e.value)


def test_encrypted_pdf_wrong_password(tmp_path):
    path = encrypt_pdf(make_pdf(PAGES), tmp_path / "enc.pdf", user="secret")
    with pytest.raises(IngestError, match="encrypted and the password is wrong"):
        load_document(path, password="not-it")


def test_pdf_with_only_an_owner_password_opens(tmp_path):
    path = encrypt_pdf(make_pdf(PAGES), tmp_path / "owner.pdf", user="")
    assert load_document(path).text == "\n\n".join(PAGES)


def test_random_bytes_named_pdf(tmp_path):
    path = tmp_path / "junk.pdf"
    path.write_bytes(random.Random(7).randbytes(20_000))
    with pytest.raises(IngestError, match="not a readable PDF") as e:
        load_document(path)
    assert str(path) in str(e.value)


def test_empty_pdf_file(tmp_path):
    path = tmp_path / "empty.pdf"
    path.write_bytes(b"")
    with pytest.raises(IngestError, match="not a readable PDF"):
        load_document(path)


def test_truncated_pdf_is_recovered_with_a_warning(tmp_path):
    data = make_pdf(PAGES)
    path = tmp_path / "cut.pdf"
    path.write_bytes(data[: data.rindex(b"xref")])  # lose the xref table and trailer
    doc = load_document(path)
    assert doc.text == "\n\n".join(PAGES)
    assert any("damaged" in w for w in doc.warnings)


@pytest.mark.parametrize("keep", [0.2, 0.5, 0.8, 0.95])
def test_cut_pdf_never_crashes(tmp_path, keep):
    data = make_pdf(PAGES * 3)
    path = tmp_path / "cut.pdf"
    path.write_bytes(data[: int(len(data) * keep)])
    try:
        doc = load_document(path)
    except IngestError as e:
        assert "not a readable PDF" in str(e)
    else:
        assert doc.text and doc.segments
        assert any("damaged" in w for w in doc.warnings)
        for seg in doc.segments:
            assert doc.text[seg.start : seg.end].strip()


def test_pdf_page_that_fails_is_named(tmp_path, monkeypatch):
    from pypdf import PageObject

    real = PageObject.extract_text

    def flaky(self, *a, **kw):
        text = real(self, *a, **kw)
        if "Bravo" in text:
            raise ValueError("broken content stream")
        return text

    monkeypatch.setattr(PageObject, "extract_text", flaky)
    doc = load_document(write_pdf(tmp_path / "bad.pdf", PAGES))
    assert labels(doc) == ["page 1", "page 3"]
    assert "pages that could not be read: 2" in doc.warnings


def test_pdf_where_every_page_fails(tmp_path, monkeypatch):
    from pypdf import PageObject

    def broken(self, *a, **kw):
        raise ValueError("broken")

    monkeypatch.setattr(PageObject, "extract_text", broken)
    with pytest.raises(IngestError, match="not a readable PDF"):
        load_document(write_pdf(tmp_path / "bad.pdf", PAGES))


def test_pdf_page_cap(tmp_path):
    path = write_pdf(tmp_path / "long.pdf", [f"page body {i}" for i in range(1, 6)])
    seen = []
    doc = load_document(
        path, limits=IngestLimits(max_pdf_pages=2), progress=lambda d, t, lbl: seen.append((d, t))
    )
    assert labels(doc) == ["page 1", "page 2"]
    assert "page body 3" not in doc.text
    assert any("first 2 of 5 pages" in w for w in doc.warnings)
    assert seen == [(1, 2), (2, 2)]


def test_pdf_cancel_between_pages(tmp_path):
    path = write_pdf(tmp_path / "doc.pdf", PAGES)
    cancel = CancelToken()

    def progress(done, total, label):
        if done == 1:
            cancel.cancel()

    with pytest.raises(Cancelled):
        load_document(path, cancel=cancel, progress=progress)


def test_pdf_recognised_by_content_without_extension(tmp_path):
    path = tmp_path / "download"
    path.write_bytes(make_pdf(PAGES))
    doc = load_document(path)
    assert doc.kind == "pdf"
    assert labels(doc) == ["page 1", "page 2", "page 3"]


def test_pdf_extension_is_case_insensitive(tmp_path):
    doc = load_document(write_pdf(tmp_path / "UPPER.PDF", PAGES))
    assert doc.kind == "pdf"


def test_page_ranges():
    assert page_ranges([3, 7, 8, 9]) == "3, 7-9"
    assert page_ranges([5, 1, 2, 3, 10, 12, 11]) == "1-3, 5, 10-12"
    assert page_ranges([4]) == "4"


# --------------------------------------------------------------------------- text


def test_text_file(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# Title\r\n\r\nSome *text* here.\r\n", encoding="utf-8")
    doc = load_document(path)
    assert doc.kind == "text"
    assert doc.text == "# Title\n\nSome *text* here.\n"
    assert doc.warnings == []
    assert labels(doc) == ["notes.md"]
    seg = doc.segments[0]
    assert (seg.kind, seg.start, seg.end) == ("text", 0, len(doc.text))
    assert doc.segment_at(5).label == "notes.md"


def test_text_file_utf8_bom_and_unicode(tmp_path):
    path = tmp_path / "u.txt"
    path.write_bytes(b"\xef\xbb\xbfna\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x99\x82\n")
    doc = load_document(path)
    assert doc.text == "naïve café — 🙂\n"
    assert doc.warnings == []


def test_text_file_not_utf8(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café au lait, déjà vu\n".encode("latin-1"))
    doc = load_document(path)
    assert "\ufffd" in doc.text
    assert doc.text.startswith("caf")
    assert any("not valid UTF-8" in w for w in doc.warnings)


def test_text_file_utf16_with_bom(tmp_path):
    path = tmp_path / "wide.txt"
    path.write_bytes("hello wide world\n".encode("utf-16"))
    doc = load_document(path)
    assert doc.text == "hello wide world\n"


@pytest.mark.parametrize("content", [b"", b"   \n\t\n"])
def test_empty_text_file(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(IngestError, match="empty") as e:
        load_document(path)
    assert str(path) in str(e.value)


def test_text_size_cap(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(("é" * 100).encode("utf-8"))  # 200 bytes
    doc = load_document(path, limits=IngestLimits(max_text_bytes=51))
    assert doc.text == "é" * 25  # the half character at the cut is dropped, not replaced
    assert any("size cap" in w for w in doc.warnings)
    assert not any("UTF-8" in w for w in doc.warnings)


def test_text_file_without_known_extension(tmp_path):
    path = tmp_path / "Makefile"
    path.write_text("all:\n\techo hi\n")
    doc = load_document(path)
    assert doc.kind == "text"
    assert doc.text == "all:\n\techo hi\n"


@pytest.mark.parametrize(
    "name,content", [("blob.dat", b"\x00\x01\x02abc"), ("pic.png", b"\x89PNG\r\n"), ("x.docx", b"PK\x03\x04")]
)
def test_unsupported_file(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(IngestError, match="unsupported") as e:
        load_document(path)
    assert str(path) in str(e.value)


def test_decode_bytes_reports_replacement():
    assert decode_bytes(b"ok") == ("ok", True)
    text, clean = decode_bytes(b"a\xffb")
    assert text == "a\ufffdb" and clean is False


# --------------------------------------------------------------------------- paths


def test_missing_path(tmp_path):
    path = tmp_path / "nope" / "missing.pdf"
    with pytest.raises(IngestError) as e:
        load_document(path)
    assert str(path) in str(e.value)
    assert "no such file" in str(e.value)


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root reads everything")
def test_unreadable_file(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("hidden")
    path.chmod(0)
    try:
        with pytest.raises(IngestError, match="permission denied"):
            load_document(path)
    finally:
        path.chmod(0o600)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_without_blocking(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    with pytest.raises(IngestError, match="not a regular file"):
        load_document(path)


def test_path_may_be_a_string(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("text")
    assert load_document(str(path)).text == "text"


# --------------------------------------------------------------------------- folders


def test_folder_nested_sorted_with_headers(tmp_path):
    root = tree(
        tmp_path / "proj",
        {
            "src/pkg/mod.py": "def f():\n    return 1\n",
            "README.md": "# Proj\n",
            "src/main.py": "print('hi')",  # no final newline
            "docs/guide.rst": "Guide\n=====\n",
        },
    )
    seen = []
    doc = load_document(root, progress=lambda d, t, lbl: seen.append((d, t, lbl)))
    assert doc.kind == "folder"
    assert doc.warnings == []
    assert labels(doc) == ["README.md", "docs/guide.rst", "src/main.py", "src/pkg/mod.py"]
    for seg in doc.segments:
        assert seg.kind == "file"
        chunk = doc.text[seg.start : seg.end]
        assert chunk.startswith(file_header(seg.label))
        body = (root / seg.label).read_text()
        assert chunk == file_header(seg.label) + body + ("" if body.endswith("\n") else "\n")
    assert doc.text.count("===== src/pkg/mod.py =====") == 1
    assert doc.segment_at(doc.text.index("return 1")).label == "src/pkg/mod.py"
    assert doc.segment_at(doc.text.index("===== src/main.py")).label == "src/main.py"
    assert [d for d, _, _ in seen] == [1, 2, 3, 4]
    assert {t for _, t, _ in seen} == {4}
    # deterministic
    assert load_document(root).text == doc.text


def test_folder_gitignore_root_and_nested(tmp_path):
    root = tree(
        tmp_path / "proj",
        {
            ".gitignore": "*.log\n!keep.log\nbuild/\n/secret.txt\n",
            "app.py": "x = 1\n",
            "debug.log": "noise\n",
            "keep.log": "kept on purpose\n",
            "secret.txt": "root-only pattern\n",
            "build/out.py": "generated\n",
            "sub/secret.txt": "anchored pattern does not reach here\n",
            "sub/.gitignore": "*.tmp\n!important.log\n",
            "sub/a.tmp": "temp\n",
            "sub/important.log": "re-included by the nested file\n",
            "sub/other.log": "still ignored by the root file\n",
            "sub/code.py": "y = 2\n",
            "other/b.tmp": "the nested pattern does not apply here\n",
        },
    )
    doc = load_document(root)
    assert labels(doc) == [
        ".gitignore",
        "app.py",
        "keep.log",
        "other/b.tmp",
        "sub/.gitignore",
        "sub/code.py",
        "sub/important.log",
        "sub/secret.txt",
    ]
    text = joined(doc.warnings)
    assert "4 ignored by .gitignore" in text  # debug.log, secret.txt, sub/a.tmp, sub/other.log
    assert "1 ignored by .gitignore" in text  # the build/ folder
    assert "generated" not in doc.text


def test_folder_skips_vcs_and_tool_dirs(tmp_path):
    root = tree(
        tmp_path / "proj",
        {
            "main.py": "pass\n",
            ".git/config": "[core]\n",
            ".git/HEAD": "ref: refs/heads/main\n",
            ".hg/store": "x\n",
            "__pycache__/main.py": "not really cached\n",
            "node_modules/lib/index.js": "module.exports = 1\n",
            ".venv/lib/site.py": "venv\n",
            "env/pyvenv.cfg": "home = /usr\n",
            "env/lib/x.py": "venv without a dot\n",
        },
    )
    doc = load_document(root)
    assert labels(doc) == ["main.py"]
    w = joined(doc.warnings)
    assert "skipped 6 folder(s)" in w
    assert ".git" in w and "node_modules" in w
    assert "1 virtual environments" in w


def test_folder_skips_binaries(tmp_path):
    root = tree(
        tmp_path / "proj",
        {
            "a.py": "print(1)\n",
            "data.bin": b"\x00" * 64,
            "logo.png": b"\x89PNG\r\n\x1a\n" + b"\x01" * 32,  # known extension, no NUL needed
            "weird.txt": b"text then\x00 a NUL",
            "lib.cpython-311.so": b"\x7fELF",
        },
    )
    doc = load_document(root)
    assert labels(doc) == ["a.py"]
    assert "skipped 4 file(s): 4 binary" in doc.warnings


def test_folder_of_only_binaries(tmp_path):
    root = tree(tmp_path / "bins", {"a.png": b"\x89PNG", "b.dat": b"\x00\x00", "c/d.so": b"\x7fELF"})
    with pytest.raises(IngestError, match="no readable text files") as e:
        load_document(root)
    assert str(root) in str(e.value)
    assert "binary" in str(e.value)


def test_empty_folder(tmp_path):
    root = tmp_path / "nothing"
    root.mkdir()
    with pytest.raises(IngestError, match="empty folder") as e:
        load_document(root)
    assert str(root) in str(e.value)


def test_folder_with_only_a_git_dir(tmp_path):
    root = tree(tmp_path / "repo", {".git/HEAD": "ref\n"})
    with pytest.raises(IngestError, match="no readable text files"):
        load_document(root)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_folder_symlink_loop_does_not_hang(tmp_path):
    root = tree(tmp_path / "proj", {"a/b/c.py": "c = 3\n", "top.py": "t = 0\n"})
    os.symlink(root, root / "a" / "b" / "loop")  # points back at the root
    os.symlink("..", root / "a" / "up")
    os.symlink(root / "top.py", root / "alias.py")  # a file symlink: skipped, never duplicated
    os.symlink(tmp_path / "gone", root / "dangling")
    doc = load_document(root, limits=FolderLimits(max_entries=1000))
    assert labels(doc) == ["a/b/c.py", "top.py"]
    w = joined(doc.warnings)
    assert "stopped scanning" not in w
    assert "2 symlinks (not followed)" in w  # the two dir links, among folders
    assert "skipped 2 file(s): 2 symlinks" in w  # alias.py and the dangling link


def test_folder_file_count_cap(tmp_path):
    root = tree(tmp_path / "many", {f"f{i:02d}.py": f"n = {i}\n" for i in range(10)})
    doc = load_document(root, limits=FolderLimits(max_files=3))
    assert labels(doc) == ["f00.py", "f01.py", "f02.py"]
    assert any("file cap reached: 7 more file(s)" in w and "3 files" in w for w in doc.warnings)


def test_folder_total_size_cap(tmp_path):
    root = tree(tmp_path / "big", {f"f{i}.txt": "x" * 99 + "\n" for i in range(5)})
    doc = load_document(root, limits=IngestLimits(folder=FolderLimits(max_total_bytes=250)))
    assert labels(doc) == ["f0.txt", "f1.txt"]
    assert any("size cap reached: 3 more file(s)" in w for w in doc.warnings)


def test_folder_per_file_cap(tmp_path):
    root = tree(tmp_path / "p", {"small.py": "s = 1\n", "huge.py": "h = 1\n" * 1000})
    doc = load_document(root, limits=FolderLimits(max_file_bytes=1024))
    assert labels(doc) == ["small.py"]
    assert any("1 over the per-file cap of 1 KB" in w for w in doc.warnings)


def test_folder_scan_cap(tmp_path):
    root = tree(tmp_path / "wide", {f"f{i:02d}.py": "x\n" for i in range(20)})
    doc = load_document(root, limits=FolderLimits(max_entries=10))
    assert labels(doc) == [f"f{i:02d}.py" for i in range(10)]
    assert any("stopped scanning after 10 entries" in w for w in doc.warnings)


def test_folder_non_utf8_file(tmp_path):
    root = tree(tmp_path / "p", {"ok.py": "a = 1\n", "legacy.c": "/* caf\xe9 */\n".encode("latin-1")})
    doc = load_document(root)
    assert labels(doc) == ["legacy.c", "ok.py"]
    seg = doc.segments[0]
    assert "\ufffd" in doc.text[seg.start : seg.end]
    assert any("not valid UTF-8" in w and "legacy.c" in w for w in doc.warnings)


def test_folder_empty_files_are_skipped(tmp_path):
    root = tree(tmp_path / "p", {"pkg/__init__.py": "", "pkg/mod.py": "m = 1\n"})
    doc = load_document(root)
    assert labels(doc) == ["pkg/mod.py"]
    assert "skipped 1 file(s): 1 empty" in doc.warnings


def test_folder_cancel(tmp_path):
    root = tree(tmp_path / "p", {f"f{i}.py": "x\n" for i in range(5)})
    cancel = CancelToken()
    cancel.cancel()
    with pytest.raises(Cancelled):
        load_document(root, cancel=cancel)


names = st.text(alphabet="abcxyz_-.", min_size=1, max_size=6).filter(
    lambda s: s not in {".", ".."} and not s.startswith(".")
)


contents = st.text(
    alphabet=st.one_of(st.characters(exclude_categories=("Cc", "Cs")), st.sampled_from("\n\t")),
    min_size=1,
    max_size=40,
).filter(str.strip)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.dictionaries(
        st.lists(names, min_size=1, max_size=3).map("/".join), contents, min_size=1, max_size=6
    )
)
def test_folder_segments_tile_the_text(tmp_path_factory, files):
    root = tmp_path_factory.mktemp("prop")
    written = {}
    for rel, content in files.items():
        p = root / rel
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            if p.is_dir():
                continue
            p.write_text(content, encoding="utf-8")
            written[rel] = content
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            continue  # a name used both as a file and as a folder
    if not written:
        return
    try:
        doc = load_document(root)
    except IngestError:
        # only when every file was skipped (e.g. a binary extension such as ".a")
        assert not doc_has_text_files(root)
        return
    assert labels(doc) == sorted(labels(doc))
    prev_end = 0
    for seg in doc.segments:
        assert seg.start >= prev_end
        assert doc.text[prev_end : seg.start] in ("", "\n")
        assert doc.text[seg.start : seg.end].startswith(file_header(seg.label))
        assert doc.segment_at(seg.start) == seg and doc.segment_at(seg.end - 1) == seg
        prev_end = seg.end
    assert prev_end == len(doc.text)


def doc_has_text_files(root: Path) -> bool:
    from engine.ingest._common import clean_text, has_binary_extension

    return any(
        p.is_file()
        and not has_binary_extension(p.name)
        and clean_text(p.read_text(errors="replace")).strip()  # control characters are dropped
        for p in root.rglob("*")
    )


# --------------------------------------------------------------------------- real documents

REAL_PDFS = [
    # name, pages with text, chars (about), (a phrase stated once, the page it is on), warnings
    ("mpich-user-guide.pdf", 16, 20_400, ("called Hydra", "page 4"), []),
    ("xfig-howto.pdf", 24, 49_400, ("ferric-chloride", "page 18"), []),
    ("mpfi.pdf", 27, 67_000, ("Nathalie Revol", "page 22"), ["pages with no text: 28"]),
    ("R-intro.pdf", 113, 248_600, ("make and distribute verbatim", "page 2"), []),
]


@pytest.mark.parametrize("name,pages,chars,probe,warnings", REAL_PDFS, ids=[r[0] for r in REAL_PDFS])
def test_real_pdfs(name, pages, chars, probe, warnings):
    path = DOCS / name
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    doc = load_document(path)
    assert len(doc.segments) == pages
    assert abs(doc.n_chars - chars) < chars * 0.05
    phrase, page = probe
    assert doc.text.count(phrase) == 1
    assert doc.segment_at(doc.text.index(phrase)).label == page
    assert "\ufb01" not in doc.text  # ligatures are expanded
    assert doc.warnings == warnings


def test_real_sample_text_and_code(tmp_path):
    sample = REPO / "engine" / "eval" / "calibration_sample.md"
    if not sample.exists():
        pytest.skip("resources are not in this checkout")
    code = sample_folder("toolz", cache=tmp_path)  # resources/samples/code/toolz.tar.gz
    doc = load_document(sample)
    assert doc.warnings == [] and 2500 <= len(doc.text.split()) <= 3500
    folder = load_document(code)
    assert "toolz/itertoolz.py" in labels(folder)
    assert folder.segment_at(folder.text.index("def sliding_window")).label == "toolz/itertoolz.py"
