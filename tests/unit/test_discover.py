"""`models --discover`: GGUFs in a fake LM Studio, Ollama and Hugging Face cache, each listed once with
its header's facts, a corrupt file listed with its error, nothing written; names resolve to paths."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter, LlamaFileType

from engine.cli.main import build_parser, main
from engine.cli.options import model_settings_from
from engine.core.errors import ModelError
from engine.models import discover_walk
from engine.models.gguf_header import GGUFHeaderError, read_header
from engine.models.resolve import resolve_model
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf

ROOT = Path(__file__).resolve().parents[2]
OLLAMA_DIGEST = "ab" * 32
HF_BLOB = "0123456789abcdef" * 4


def write_llama_header(path: Path, *, size_label: str = "7B", ctx: int = 4096) -> Path:
    """A GGUF whose metadata says what a 7B Q4_K_M says, with one tiny tensor."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(path), "llama")
    writer.add_name("Tiny Llama Header")
    writer.add_size_label(size_label)
    writer.add_file_type(LlamaFileType.MOSTLY_Q4_K_M)
    writer.add_context_length(ctx)
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def link(path: Path, target: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(os.path.relpath(target, path.parent))
    return path


def build_tree(home: Path) -> dict[str, Path]:
    """LM Studio, Ollama and HF caches under `home`, with links, a corrupt file and a loop."""
    lms = home / ".lmstudio" / "models"
    files = {
        "lmstudio": write_tiny_qwen2_gguf(
            lms / "pub" / "Tiny-GGUF" / "tiny-lms.gguf", name="tiny lms", n_ctx=2048
        )
    }
    files["corrupt"] = lms / "pub" / "Broken-GGUF" / "broken.gguf"
    files["corrupt"].parent.mkdir(parents=True)
    files["corrupt"].write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    files["text"] = lms / "pub" / "Broken-GGUF" / "notes.gguf"
    files["text"].write_text("not a model")
    hub = home / ".cache" / "huggingface" / "hub" / "models--org--Tiny-Llama-GGUF"
    files["hf_blob"] = write_llama_header(hub / "blobs" / HF_BLOB)
    for revision in ("rev1", "rev2"):  # two snapshots of one blob: one model
        link(hub / "snapshots" / revision / "tiny-llama-q4_k_m.gguf", files["hf_blob"])
    link(lms / "pub" / "Linked" / "tiny-llama-q4_k_m.gguf", files["hf_blob"])  # LM Studio links to it too
    ollama = home / ".ollama" / "models"
    files["ollama_blob"] = write_tiny_qwen2_gguf(
        ollama / "blobs" / f"sha256-{OLLAMA_DIGEST}", name="ollama tiny"
    )
    write_manifest(ollama, "library/tinyqwen/latest", f"sha256:{OLLAMA_DIGEST}")
    write_manifest(ollama, "library/escape/latest", "sha256:../../../../etc/passwd")
    return files


def write_manifest(root: Path, name: str, digest: str) -> None:
    path = root / "manifests" / "registry.ollama.ai" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    layers = [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "cd" * 32},
        {"mediaType": "application/vnd.ollama.image.model", "digest": digest},
    ]
    path.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for name in ("HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS", "SPECPREFILL_MODEL_DIRS"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def tree(home):
    return build_tree(home)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def listed(capsys, *argv: str) -> dict:
    assert main(["models", "--discover", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def by_name(found: dict) -> dict[str, dict]:
    return {m["name"]: m for m in found["models"]}


def test_each_model_is_listed_once_with_its_header_facts(tree, home, capsys):
    found = listed(capsys)
    names = [m["name"] for m in found["models"]]
    assert sorted(names) == sorted(["tiny-lms", "broken", "notes", "tiny-llama-q4_k_m", "tinyqwen:latest"])
    models = by_name(found)
    tiny = models["tiny-lms"]
    params = sum(int(t.n_elements) for t in GGUFReader(tree["lmstudio"]).tensors)
    assert (tiny["architecture"], tiny["parameters"], tiny["quantization"], tiny["context_length"]) == (
        "qwen2",
        params,
        "F32",
        2048,
    )
    assert tiny["size_bytes"] == tree["lmstudio"].stat().st_size and tiny["error"] is None
    assert tiny["source"] == "lmstudio" and tiny["id"] == "lmstudio:pub/Tiny-GGUF/tiny-lms"
    llama = models["tiny-llama-q4_k_m"]
    assert (llama["architecture"], llama["size_label"], llama["quantization"], llama["context_length"]) == (
        "llama",
        "7B",
        "Q4_K_M",
        4096,
    )
    assert llama["resolved_path"] == str(tree["hf_blob"].resolve())
    ollama = models["tinyqwen:latest"]
    assert ollama["source"] == "ollama" and ollama["path"] == str(tree["ollama_blob"])


def test_a_corrupt_file_is_listed_with_its_error(tree, capsys):
    models = by_name(listed(capsys))
    assert models["broken"]["error"] and models["broken"]["architecture"] is None
    assert "bad magic" in models["notes"]["error"]
    assert "Traceback" not in capsys.readouterr().err


def test_the_hf_cache_alone_lists_its_snapshot_once(tree, home, capsys):
    shutil.rmtree(home / ".lmstudio")
    models = [m for m in listed(capsys)["models"] if m["source"] == "huggingface"]
    assert [m["id"] for m in models] == ["huggingface:org/Tiny-Llama-GGUF/tiny-llama-q4_k_m"]


def test_nothing_is_written_or_changed(tree, home, capsys):
    before = snapshot(home)
    listed(capsys)
    assert snapshot(home) == before


def test_env_folders_and_flag_folders_are_sources(home, tmp_path, monkeypatch, capsys):
    flagged = write_llama_header(tmp_path / "flagged" / "a.gguf")
    env_dir = tmp_path / "from-env"
    write_llama_header(env_dir / "big-00001-of-00002.gguf")
    write_llama_header(env_dir / "big-00002-of-00002.gguf")  # a later part: not listed on its own
    (env_dir / "loop").symlink_to(env_dir)  # a link loop ends the walk there
    monkeypatch.setenv("SPECPREFILL_MODEL_DIRS", str(env_dir))
    found = listed(capsys, "--discover-dir", str(flagged.parent))
    assert [(m["name"], m["source"]) for m in found["models"]] == [("a", "folder"), ("big", "folder")]
    assert [s["path"] for s in found["sources"] if s["kind"] == "folder"] == [
        str(flagged.parent),
        str(env_dir),
    ]


def test_ollama_models_env_and_hf_hub_cache_env_are_honoured(home, tmp_path, monkeypatch, capsys):
    write_tiny_qwen2_gguf(tmp_path / "ollama" / "blobs" / f"sha256-{OLLAMA_DIGEST}")
    write_manifest(tmp_path / "ollama", "user/mine/q4", f"sha256:{OLLAMA_DIGEST}")
    hub = tmp_path / "hub" / "models--a--b"
    link(hub / "snapshots" / "r" / "sub" / "m.gguf", write_llama_header(hub / "blobs" / HF_BLOB))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert [m["id"] for m in listed(capsys)["models"]] == ["ollama:user/mine:q4", "huggingface:a/b/sub/m"]


def test_the_walk_stops_at_its_entry_budget(home, tmp_path, monkeypatch, capsys):
    for i in range(10):
        write_llama_header(tmp_path / "many" / f"m{i}.gguf")
    monkeypatch.setattr(discover_walk, "MAX_ENTRIES", 4)
    found = listed(capsys, "--discover-dir", str(tmp_path / "many"))
    folder = next(s for s in found["sources"] if s["kind"] == "folder")
    assert folder["truncated"] and folder["models"] == 4


def test_the_text_listing_names_each_model_and_source(tree, capsys):
    assert main(["models", "--discover"]) == 0
    out = capsys.readouterr().out
    assert "tiny-llama-q4_k_m  [lmstudio]" in out and "llama 7B Q4_K_M, 4,096-token context" in out
    assert "unreadable: not a GGUF file (bad magic)" in out
    assert "ollama" in out and ".ollama/models (1 model(s))" in out


def test_header_reader_refuses_truncated_and_huge_lengths(tmp_path):
    whole = write_llama_header(tmp_path / "ok.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[:60])
    with pytest.raises(GGUFHeaderError, match="truncated"):
        read_header(tmp_path / "cut.gguf")
    huge = bytearray(whole)
    huge[24:32] = (1 << 62).to_bytes(8, "little")  # the first key's length
    (tmp_path / "huge.gguf").write_bytes(bytes(huge))
    with pytest.raises(GGUFHeaderError):
        read_header(tmp_path / "huge.gguf")


def test_names_resolve_to_paths_and_ambiguity_is_refused(tree, home, tmp_path):
    assert resolve_model("tiny-lms") == tree["lmstudio"]
    assert resolve_model("TinyQwen:latest") == tree["ollama_blob"]
    assert resolve_model(str(tree["lmstudio"])) == tree["lmstudio"]  # a path stays a path
    assert resolve_model("no-such-model") == Path("no-such-model")
    write_tiny_qwen2_gguf(home / ".lmstudio" / "models" / "other" / "Tiny-GGUF" / "tiny-lms.gguf")
    with pytest.raises(ModelError, match=r"tiny-lms names 2 models: lmstudio:other/Tiny-GGUF/tiny-lms"):
        resolve_model("tiny-lms")
    assert resolve_model("lmstudio:pub/Tiny-GGUF/tiny-lms") == tree["lmstudio"]


def test_target_and_draft_flags_take_a_discovered_name(tree):
    args = build_parser().parse_args(["doctor", "--target", "tiny-lms", "--draft", "tinyqwen:latest"])
    settings = model_settings_from(args)
    assert (settings.target_path, settings.draft_path) == (tree["lmstudio"], tree["ollama_blob"])


@pytest.mark.slow
def test_discover_as_a_command(tree, home):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HF_HUB_CACHE", "OLLAMA_MODELS")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "models", "--discover", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    models = by_name(json.loads(proc.stdout))
    assert len(models) == 5 and models["broken"]["error"] and models["tiny-lms"]["architecture"] == "qwen2"
