"""Fuzzing with hypothesis: mutated PDFs, and the selection math.

Mutated PDFs (bytes flipped, cut short, xref and trailer damaged, spans spliced): each case
either extracts text or ends in the one-line IngestError, with no other exception and no
case over 10 s. The selection math, for any length, keep in (0, 1] and chunk size: kept
indices are sorted, unique and in range, and the protected head and tail are always kept.

SPECPREFILL_FUZZ_SCALE multiplies the example counts (default 1: 560 PDF cases); the
figures are printed at the end of the run and written to SPECPREFILL_FUZZ_REPORT if set.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.errors import IngestError
from engine.draft.selection import plan_selection
from engine.ingest import load_document
from tests.fixtures.pdfs import encrypt_pdf, make_pdf
from tests.reliability import fuzz_figures

REPO = Path(__file__).resolve().parents[2]
REAL_SEED = REPO / "resources" / "samples" / "docs" / "mpich-user-guide.pdf"
SCALE = float(os.environ.get("SPECPREFILL_FUZZ_SCALE", "1"))
CASE_LIMIT_S = 10.0
PASSWORD = "s3cret"
SEED_PAGES = ["Alpha page one\nwith a second line", "Bravo page two", "Charlie page three (the last)"]

ERROR_KINDS = (
    "not a readable PDF",
    "no extractable text",
    "encrypted",
    "decompression bomb",
    "needs a feature",
)


def examples(n: int) -> int:
    return max(1, round(n * SCALE))


def fuzz_settings(n: int):
    return settings(
        max_examples=examples(n),
        deadline=CASE_LIMIT_S * 1000,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- mutations --------------------------------------------------------------------------------
# A mutation is a tuple; positions are fractions of the file so one case applies to any seed.

fractions = st.floats(0, 1, exclude_max=True)
mutations = st.one_of(
    st.tuples(st.just("flip"), fractions, st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("truncate"), fractions),
    st.tuples(st.just("damage-xref"), fractions, st.binary(min_size=1, max_size=32)),
    st.tuples(st.just("startxref"), st.integers(-10, 10**9)),
    st.tuples(st.just("splice"), fractions, st.integers(0, 512), st.binary(max_size=64)),
)


def mutate(data: bytes, ops: list[tuple]) -> bytes:
    for op in ops:
        data = APPLY[op[0]](bytearray(data), *op[1:])
    return bytes(data)


def flip(data: bytearray, at: float, xor: bytes) -> bytes:
    start = int(at * len(data))
    for i, x in enumerate(xor[: len(data) - start]):
        data[start + i] ^= x
    return data


def truncate(data: bytearray, at: float) -> bytes:
    return data[: int(at * len(data))]


def damage_xref(data: bytearray, at: float, junk: bytes) -> bytes:
    """Overwrite bytes inside the cross-reference table and trailer (or the file's last quarter)."""
    table = data.rfind(b"xref")
    start = table if table >= 0 else len(data) * 3 // 4
    pos = start + int(at * (len(data) - start))
    data[pos : pos + len(junk)] = junk
    return data


def startxref(data: bytearray, offset: int) -> bytes:
    mark = data.rfind(b"startxref")
    if mark < 0:
        return data
    end = data.find(b"%%EOF", mark)
    return data[:mark] + b"startxref\n%d\n" % offset + (data[end:] if end >= 0 else b"")


def splice(data: bytearray, at: float, n_delete: int, insert: bytes) -> bytes:
    pos = int(at * len(data))
    return data[:pos] + insert + data[pos + n_delete :]


APPLY = {
    "flip": flip,
    "truncate": truncate,
    "damage-xref": damage_xref,
    "startxref": startxref,
    "splice": splice,
}


# -- one case ---------------------------------------------------------------------------------


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so no `except Exception` in the code under test eats it."""


@contextmanager
def hard_deadline(seconds: float):
    def expire(signum, frame):
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome_of(path: Path, password: str | None) -> str:
    """'text' or 'error: <kind>'. Any other exception, or a hang, fails the case."""
    try:
        with hard_deadline(CASE_LIMIT_S):
            doc = load_document(path, password=password)
    except IngestError as e:
        message = str(e)
        assert "\n" not in message and str(path) in message, message
        return "error: " + next((kind for kind in ERROR_KINDS if kind in message), "other")
    assert doc.text.strip() and doc.segments
    assert all(0 <= s.start < s.end <= len(doc.text) for s in doc.segments)
    return "text, with warnings" if doc.warnings else "text"


def run_case(tally: dict, path: Path, data: bytes, password: str | None) -> None:
    path.write_bytes(data)
    started = time.monotonic()
    outcome = outcome_of(path, password)
    elapsed = time.monotonic() - started
    assert elapsed < CASE_LIMIT_S
    tally["outcomes"][outcome] += 1
    tally["cases"] += 1
    tally["slowest_s"] = max(tally["slowest_s"], elapsed)


@pytest.fixture(scope="module", autouse=True)
def saved_figures(tmp_path_factory):
    yield
    fuzz_figures.save(tmp_path_factory.getbasetemp())


def new_tally(name: str) -> dict:
    return fuzz_figures.register(name, {"cases": 0, "outcomes": Counter(), "slowest_s": 0.0})


# -- the PDF fuzz tests ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated_seeds(tmp_path_factory) -> dict[str, tuple[bytes, str | None]]:
    """name -> (bytes, password): plain streams, compressed streams, and an encrypted copy."""
    plain = make_pdf(SEED_PAGES)
    encrypted = encrypt_pdf(plain, tmp_path_factory.mktemp("seed") / "enc.pdf", user=PASSWORD).read_bytes()
    return {
        "plain": (plain, None),
        "compressed": (make_pdf(SEED_PAGES, compress=True), None),
        "encrypted": (encrypted, PASSWORD),
    }


def test_mutated_generated_pdfs_extract_or_fail_cleanly(generated_seeds, tmp_path):
    tally = new_tally("mutated generated PDFs (plain, compressed, encrypted)")

    @fuzz_settings(480)
    @given(seed=st.sampled_from(sorted(generated_seeds)), ops=st.lists(mutations, min_size=1, max_size=3))
    def case(seed, ops):
        data, password = generated_seeds[seed]
        run_case(tally, tmp_path / "case.pdf", mutate(data, ops), password)

    case()
    assert tally["cases"] >= examples(480)


@pytest.mark.skipif(not REAL_SEED.exists(), reason="resources/samples/docs is not in this checkout")
def test_mutated_real_pdf_extracts_or_fails_cleanly(tmp_path):
    tally = new_tally(f"mutated {REAL_SEED.name} (16 pages, 85 KB)")
    seed = REAL_SEED.read_bytes()

    @fuzz_settings(80)
    @given(ops=st.lists(mutations, min_size=1, max_size=3))
    def case(ops):
        run_case(tally, tmp_path / "case.pdf", mutate(seed, ops), None)

    case()
    assert tally["cases"] >= examples(80)


def test_the_deadline_stops_a_hang():
    with pytest.raises(Hang), hard_deadline(0.05):
        time.sleep(1)


# -- the selection math ---------------------------------------------------------------------


def importance_of(n: int, shape: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if shape == "ties":
        return rng.integers(0, 3, n).astype(float)
    if shape == "flat":
        return np.zeros(n)
    if shape == "spiky":
        return np.where(rng.random(n) < 0.02, 1e6, rng.random(n) * 1e-6)
    return rng.random(n)


@fuzz_settings(400)
@given(
    n=st.integers(1, 20_000),
    chunk=st.integers(1, 256),
    keep=st.floats(0, 1, exclude_min=True),
    tail=st.floats(0, 1),
    shape=st.sampled_from(["random", "ties", "flat", "spiky"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_selection_keeps_sorted_unique_in_range_indices_with_head_and_tail(n, chunk, keep, tail, shape, seed):
    tally = fuzz_figures.get("selection math") or new_tally("selection math")
    tail_start = int(tail * n)
    scores, protected, kept, idx = plan_selection(importance_of(n, shape, seed), chunk, keep, tail_start)
    n_chunks = math.ceil(n / chunk)

    assert np.all(np.diff(idx) > 0) and idx[0] >= 0 and idx[-1] < n  # sorted, unique, in range
    kept_mask = np.zeros(n, dtype=bool)
    kept_mask[idx] = True
    assert kept_mask[: min(chunk, n)].all()  # the head chunk
    assert kept_mask[min(tail_start, n - 1) :].all()  # the tail, and always the last token
    assert len(kept) == min(n_chunks, max(math.ceil(keep * n_chunks), len(protected)))
    assert len(idx) == sum(min(chunk, n - c * chunk) for c in kept)
    chosen = sorted(set(kept) - set(protected))
    dropped = sorted(set(range(n_chunks)) - set(kept))
    if chosen and dropped:  # what was kept by score scores at least as high as anything dropped
        assert scores[chosen].min() >= scores[dropped].max()
    tally["cases"] += 1
    tally["outcomes"]["properties held"] += 1
