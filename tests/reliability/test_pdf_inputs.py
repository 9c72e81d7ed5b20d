"""Bad PDFs: each one reads, with a warning that names what was lost, or ends in one clear IngestError.

Memory and time stay bounded whatever the file: bombs, 1,000+ pages, gigabytes of junk.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from engine.core.errors import IngestError
from engine.ingest import IngestLimits, load_document
from engine.pipeline.peak_memory import PeakMemory
from tests.fixtures.pdfs import (
    assemble_pdf,
    encrypt_pdf,
    flate_stream_object,
    make_bomb_pdf,
    make_pdf,
    stream_object,
    text_operators,
    write_pdf,
)
from tests.reliability.support import assert_one_error_line, run_cli, seconds_to_stop_reading

PAGES = ["Alpha page one", "Bravo page two", "Charlie page three"]
MiB = 1 << 20


def refused(path: Path, **kwargs) -> str:
    """The one-line message load_document ends with."""
    with pytest.raises(IngestError) as err:
        load_document(path, **kwargs)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def written(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- corrupt and truncated ------------------------------------------------------------------


def test_a_pdf_cut_short_keeps_the_pages_before_the_cut(tmp_path):
    data = make_pdf(PAGES, compress=True)
    path = written(tmp_path, "cut.pdf", data[: data.index(b"8 0 obj")])  # page 3's object is gone
    doc = load_document(path)
    assert "Alpha page one" in doc.text and "Bravo page two" in doc.text
    assert any("damaged" in w for w in doc.warnings)


def test_a_page_whose_stream_is_corrupt_is_named_and_the_others_are_read(tmp_path):
    streams = [stream_object(text_operators(text), compress=True) for text in PAGES]
    streams[1] = flate_stream_object(random.Random(1).randbytes(300))
    doc = load_document(written(tmp_path, "bad-page.pdf", assemble_pdf(streams)))
    assert doc.text == "Alpha page one\n\nCharlie page three"
    assert "damaged pages, some of their text may be missing: 2" in doc.warnings


def test_a_wrong_xref_offset_is_rebuilt_with_a_warning(tmp_path):
    data = make_pdf(PAGES)
    broken = data[: data.rindex(b"startxref")] + b"startxref\n999999\n%%EOF\n"
    doc = load_document(written(tmp_path, "xref.pdf", broken))
    assert doc.text == "\n\n".join(PAGES)
    assert any("structure" in w for w in doc.warnings)


def test_random_bytes_named_pdf(tmp_path):
    message = refused(written(tmp_path, "junk.pdf", random.Random(7).randbytes(50_000)))
    assert "not a readable PDF" in message and "not a PDF file" in message


def test_a_pdf_header_over_garbage(tmp_path):
    message = refused(written(tmp_path, "fake.pdf", b"%PDF-1.7\n" + random.Random(8).randbytes(50_000)))
    assert "not a readable PDF" in message


def test_a_gigantic_damaged_pdf_is_refused_without_being_read(tmp_path):
    path = written(tmp_path, "huge.pdf", b"%PDF-1.7\n1 0 obj\n<< >>\nendobj\n")
    with open(path, "r+b") as fh:
        fh.truncate(3 << 30)  # 3 GB, sparse: no end marker, so only a repair could read it
    started = time.monotonic()
    with PeakMemory() as peak:
        message = refused(path)
    assert time.monotonic() - started < 2.0
    assert peak.peak_bytes < 64 * MiB
    assert "too large to repair" in message and "cut short" in message


# -- encrypted and scanned -------------------------------------------------------------------


@pytest.mark.parametrize(
    "password,expected",
    [
        (None, "is encrypted; a password is needed to open it"),
        ("guess", "is encrypted and the password is wrong"),
    ],
)
def test_an_encrypted_pdf_says_what_the_password_problem_is(tmp_path, password, expected):
    path = encrypt_pdf(make_pdf(PAGES), tmp_path / "contract.pdf", user="s3cret")
    assert expected in refused(path, password=password)
    assert load_document(path, password="s3cret").text == "\n\n".join(PAGES)


def test_the_cli_says_how_to_give_the_password(tmp_path, capsys):
    path = encrypt_pdf(make_pdf(PAGES), tmp_path / "contract.pdf", user="s3cret")
    code, lines = run_cli(capsys, "run", "--doc", str(path), "--question", "q?")
    assert_one_error_line(code, lines, "a password is needed to open it (give it with --password)")


def test_a_scan_without_a_text_layer_says_ocr_is_not_part_of_the_app(tmp_path):
    message = refused(write_pdf(tmp_path / "scan.pdf", [None, None, None]))
    assert "has no extractable text" in message and "OCR is not part of this app" in message


# -- bombs and size -----------------------------------------------------------------------


def test_a_decompression_bomb_page_is_skipped_in_bounded_memory_and_time(tmp_path):
    path = written(tmp_path, "bomb.pdf", make_bomb_pdf(256 * MiB))  # a 250 KB file
    assert path.stat().st_size < MiB
    started = time.monotonic()
    with PeakMemory() as peak:
        doc = load_document(path)
    assert time.monotonic() - started < 5.0
    assert peak.peak_bytes < 64 * MiB
    assert doc.text == "Ordinary page 1 before the bomb."
    assert any("decompression bomb" in w and w.endswith(": 2") for w in doc.warnings)


def test_a_pdf_that_is_only_a_bomb_is_one_clear_error(tmp_path):
    message = refused(written(tmp_path, "only-bomb.pdf", make_bomb_pdf(32 * MiB, text_pages=0)))
    assert "decompression bomb" in message and "8 MB cap" in message


def test_text_stops_at_the_text_cap_with_a_warning(tmp_path):
    path = write_pdf(tmp_path / "wordy.pdf", ["A" * 600_000, "B" * 600_000, "C" * 600_000], compress=True)
    doc = load_document(path, limits=IngestLimits(max_text_bytes=MiB))
    assert len(doc.text) == MiB
    assert [s.label for s in doc.segments] == ["page 1", "page 2"]
    assert any("only the first 2 of 3 pages" in w and "text cap" in w for w in doc.warnings)


def test_a_long_pdf_reads_in_flat_memory(tmp_path):
    fat = b"%" + b"x" * MiB + b"\n"  # a megabyte of content per page that is not text
    streams = [stream_object(fat + text_operators(f"page {i}"), compress=True) for i in range(40)]
    path = written(tmp_path, "fat.pdf", assemble_pdf(streams))
    with PeakMemory() as peak:
        doc = load_document(path)
    assert len(doc.segments) == 40
    assert peak.peak_bytes < 20 * MiB  # without dropping decoded pages it grows by 40 MB


# -- a thousand pages: progress, page cap, cancel ---------------------------------------


@pytest.fixture(scope="module")
def manual(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("manual") / "manual.pdf"
    return write_pdf(path, [f"Chapter {i}: how part {i} works." for i in range(1, 1201)])


def test_a_1200_page_pdf_reports_progress_for_each_page_and_stops_at_the_page_cap(manual):
    seen = []
    doc = load_document(
        manual,
        limits=IngestLimits(max_pdf_pages=1000),
        progress=lambda done, total, label: seen.append((done, total)),
    )
    assert seen == [(n, 1000) for n in range(1, 1001)]
    assert doc.segments[-1].label == "page 1000"
    assert "only the first 1000 of 1200 pages were read (page cap 1000)" in doc.warnings


def test_cancel_during_a_long_extraction_stops_at_once(manual):
    assert seconds_to_stop_reading(manual, cancel_at=300) < 1.0
    assert len(load_document(manual).segments) == 1200  # the next read is whole
