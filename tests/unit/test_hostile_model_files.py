"""Model files from the internet, crafted to hurt: a GGUF header that declares a huge array or key,
a FIFO where an Ollama blob should be, a manifest nested past Python's recursion limit, and header
strings that carry terminal escapes. Each is refused or listed as unreadable at once; nothing hangs,
crashes or reaches the terminal raw. A real model's header still reads as it always did."""

from __future__ import annotations

import json
import logging
import os
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType

from engine.cli.main import main
from engine.models import defaults, gguf_header
from engine.models.gguf_header import GGUFHeaderError, read_header
from engine.models.untrusted import printable
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf

OLLAMA_DIGEST = "ab" * 32
HOSTILE_FILE_BYTES = 1 << 30  # sparse: the zeros after the header cost no disk
QUICKLY_S = 0.5
ESCAPES = "\x1b]0;pwned\x07\x1b[2J"
NESTED_JSON = "[" * 200_000 + "]" * 200_000


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for name in ("HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS", "SPECPREFILL_MODEL_DIRS"):
        monkeypatch.delenv(name, raising=False)
    return home


def gguf_string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def write_sparse_gguf(path: Path, kv: bytes, n_kv: int = 1) -> Path:
    """A GGUF header with these key-value bytes, then zeros up to a gigabyte (a sparse file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv) + kv)
        fh.truncate(HOSTILE_FILE_BYTES)
    return path


def huge_string_array(path: Path) -> Path:
    """One string array whose declared elements fill the file exactly: eight zero bytes, an empty string."""
    kv = gguf_string(b"tokenizer.ggml.merges") + struct.pack("<II", GGUFValueType.ARRAY, GGUFValueType.STRING)
    header_bytes = 24 + len(kv) + 8
    return write_sparse_gguf(path, kv + struct.pack("<Q", (HOSTILE_FILE_BYTES - header_bytes) // 8))


def huge_key(path: Path) -> Path:
    """A first key half a gigabyte long."""
    return write_sparse_gguf(path, struct.pack("<Q", HOSTILE_FILE_BYTES // 2))


def timed_refusal(path: Path, arrays: tuple[str, ...] = ()) -> tuple[float, str]:
    start = time.perf_counter()
    with pytest.raises(GGUFHeaderError) as refused:
        read_header(path, arrays)
    return time.perf_counter() - start, str(refused.value)


def write_model(path: Path, *, arch: str = "llama", name: str = "Tiny Llama Header") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_file_type(LlamaFileType.MOSTLY_Q4_K_M)
    writer.add_context_length(4096)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_manifest(root: Path, name: str, text: str) -> Path:
    path = root / "manifests" / "registry.ollama.ai" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def manifest_for(digest: str) -> str:
    layer = {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}"}
    return json.dumps({"schemaVersion": 2, "layers": [layer]})


def discovered(capsys, *argv: str) -> dict[str, dict]:
    assert main(["models", "--discover", "--json", *argv]) == 0
    return {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}


# -- the GGUF header's budget -------------------------------------------------------------------


@pytest.mark.timeout(10)
@pytest.mark.parametrize("arrays", [(), ("tokenizer.ggml.merges",)], ids=["skipped", "kept"])
def test_a_huge_declared_string_array_is_refused_at_once(tmp_path, arrays):
    elapsed, why = timed_refusal(huge_string_array(tmp_path / "array.gguf"), arrays)
    assert elapsed < QUICKLY_S and "tokenizer.ggml.merges" in why and "budget" in why


@pytest.mark.timeout(10)
def test_a_huge_key_is_refused_without_reading_it(tmp_path):
    elapsed, why = timed_refusal(huge_key(tmp_path / "key.gguf"))
    assert elapsed < QUICKLY_S and "key" in why


def test_strings_past_the_metadata_budget_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(gguf_header, "MAX_METADATA_BYTES", 1 << 20)
    value = b"x" * (1 << 18)
    kv = b"".join(
        gguf_string(f"k{i}".encode()) + struct.pack("<I", GGUFValueType.STRING) + gguf_string(value)
        for i in range(5)
    )
    path = tmp_path / "strings.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 5) + kv)
    with pytest.raises(GGUFHeaderError, match="budget"):
        read_header(path)


def expected_fields(path: Path, kept: tuple[str, ...]) -> tuple[dict, dict]:
    """What the gguf package reads from the file: the metadata a header reader keeps, and every array's length."""
    metadata, lengths = {}, {}
    for name, field in GGUFReader(path).fields.items():
        if name.startswith("GGUF."):
            continue
        if field.types[0] == GGUFValueType.ARRAY:
            lengths[name] = len(field.data)
            if name in kept:
                metadata[name] = field.contents()
        else:
            metadata[name] = field.contents()
    return metadata, lengths


def test_a_real_header_reads_as_the_gguf_package_reads_it(tmp_path):
    path = write_tiny_qwen2_gguf(tmp_path / "tiny.gguf", name="tiny")
    kept = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")
    header = read_header(path, kept)
    metadata, lengths = expected_fields(path, kept)
    assert header.metadata.keys() == metadata.keys() and header.array_lengths == lengths
    for key, value in metadata.items():
        expected = pytest.approx(value) if isinstance(value, float) else value
        assert header.metadata[key] == expected, key
    tensors = GGUFReader(path).tensors
    assert header.n_tensors == len(tensors) and header.tensor_names == [t.name for t in tensors]
    assert header.n_parameters == sum(int(t.n_elements) for t in tensors)


@pytest.mark.timeout(10)
def test_discovery_lists_a_hostile_gguf_as_unreadable_at_once(home, tmp_path, capsys):
    huge_string_array(tmp_path / "found" / "array.gguf")
    huge_key(tmp_path / "found" / "key.gguf")
    start = time.perf_counter()
    models = discovered(capsys, "--discover-dir", str(tmp_path / "found"))
    assert time.perf_counter() - start < 2 * QUICKLY_S
    assert models["array"]["error"] and models["key"]["error"]


# -- files that are not regular files -----------------------------------------------------------


@pytest.mark.timeout(10)
def test_a_fifo_as_an_ollama_blob_is_listed_as_unreadable_not_read(home, capsys):
    ollama = home / ".ollama" / "models"
    (ollama / "blobs").mkdir(parents=True)
    os.mkfifo(ollama / "blobs" / f"sha256-{OLLAMA_DIGEST}")
    write_manifest(ollama, "library/fifo/latest", manifest_for(OLLAMA_DIGEST))
    models = discovered(capsys)
    assert "not a regular file" in models["fifo:latest"]["error"]


@pytest.mark.timeout(10)
def test_the_header_reader_refuses_a_fifo_and_a_folder(tmp_path):
    os.mkfifo(tmp_path / "fifo.gguf")
    (tmp_path / "folder.gguf").mkdir()
    for name in ("fifo.gguf", "folder.gguf"):
        with pytest.raises(GGUFHeaderError, match="not a regular file"):
            read_header(tmp_path / name)


# -- Ollama manifests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        NESTED_JSON,
        '{"layers": ' + NESTED_JSON + "}",
        "[]",
        '{"layers": 5}',
        '{"layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": 5}]}',
    ],
    ids=["nested", "nested-layers", "a-list", "layers-a-number", "digest-a-number"],
)
def test_a_malformed_manifest_is_skipped_and_the_others_listed(home, capsys, caplog, text):
    ollama = home / ".ollama" / "models"
    write_tiny_qwen2_gguf(ollama / "blobs" / f"sha256-{OLLAMA_DIGEST}")
    write_manifest(ollama, "library/good/latest", manifest_for(OLLAMA_DIGEST))
    write_manifest(ollama, "library/bad/latest", text)
    with caplog.at_level(logging.WARNING):
        models = discovered(capsys)
    assert list(models) == ["good:latest"]
    (skipped,) = [r.getMessage() for r in caplog.records if "bad" in r.getMessage()]
    assert skipped.startswith("skipped Ollama manifest ")


def test_a_nested_manifest_says_it_is_nested_too_deeply(home, capsys, caplog):
    write_manifest(home / ".ollama" / "models", "library/bad/latest", NESTED_JSON)
    with caplog.at_level(logging.WARNING):
        assert discovered(capsys) == {}
    assert "nested too deeply" in caplog.text


def test_a_nested_verification_stamp_makes_the_model_hashed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = defaults.DRAFT
    spec.path.parent.mkdir(parents=True)
    spec.path.write_bytes(b"not the model")
    spec.path.with_name(spec.path.name + ".verified.json").write_text(NESTED_JSON)
    assert defaults.is_verified(spec) is False


# -- strings shown to the user ------------------------------------------------------------------


def test_header_strings_reach_the_terminal_without_control_characters(home, tmp_path, capsys):
    write_model(tmp_path / "found" / "evil\x1b[2J.gguf", arch=ESCAPES, name=f"name{ESCAPES}\x9b31m")
    assert main(["models", "--discover", "--discover-dir", str(tmp_path / "found")]) == 0
    out = capsys.readouterr().out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b")
    (model,) = discovered(capsys, "--discover-dir", str(tmp_path / "found")).values()
    assert model["architecture"] == printable(ESCAPES)
    assert model["title"] == printable(f"name{ESCAPES}\x9b31m")


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("qwen2", "qwen2"),
        ("a\x1bb", "a\\x1bb"),
        ("tab\there", "tab\\x09here"),
        ("del\x7f", "del\\x7f"),
        ("csi\x9b", "csi\\x9b"),
        ("rtl\u202egpj.exe", "rtl\\u202egpj.exe"),
        ("caf\udce9", "caf\\udce9"),
        ("Qwen2.5 Coder 0.5B — ünïcode", "Qwen2.5 Coder 0.5B — ünïcode"),
    ],
)
def test_printable_writes_control_characters_as_escapes(raw, shown):
    assert printable(raw) == shown
