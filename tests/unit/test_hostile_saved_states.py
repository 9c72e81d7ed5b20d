"""Saved states whose sidecars were crafted to hurt: nested past Python's recursion limit, naming
files outside the store, fields of the wrong kind, a FIFO or a folder where a file should be, and
terminal escapes in what `cache list` prints. `cache list` skips them with a message, `cache clear`
removes them and nothing outside the store, and a load refuses them without reading a FIFO."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from engine.cli.main import main
from engine.core.paths import state_cache_dir
from engine.pipeline.session import PrefixKey
from engine.pipeline.state_store import (
    StateStore,
    cap_bytes,
    key_digest,
    key_json,
    runtime_version,
    tokens_sha256,
)

DIGEST, OTHER = "0" * 32, "1" * 32
NESTED_JSON = "[" * 200_000 + "]" * 200_000
ESCAPES = "\x1b]0;pwned\x07\x1b[2J"


def sidecar(digest: str = DIGEST, **changes) -> dict:
    fields = {
        "digest": digest,
        "key": {"document_sha256": "d" * 64},
        "runtime": runtime_version(),
        "target_name": "tiny-target",
        "prefix_tokens": 10,
        "tokens_sha256": "0" * 64,
        "state_bytes": 1000,
        "state_sha256": "0" * 64,
        "created": 1.0,
        "last_used": 2.0,
    }
    return {**fields, **changes}


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """The saved states' folder `cache list` and `cache clear` use."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    folder = state_cache_dir()
    folder.mkdir(parents=True)
    return folder


def seed(folder: Path, name: str, text: str, state_bytes: int = 1000) -> tuple[Path, Path]:
    state, side = folder / f"{name}.state", folder / f"{name}.json"
    state.write_bytes(b"\0" * state_bytes)
    side.write_text(text)
    return state, side


def cache(capsys, *argv: str) -> str:
    assert main(["cache", *argv]) == 0
    return capsys.readouterr().out


def test_cache_list_skips_a_nested_sidecar_and_says_why(folder, capsys, caplog):
    seed(folder, DIGEST, NESTED_JSON)
    seed(folder, OTHER, json.dumps(sidecar(OTHER)))
    with caplog.at_level(logging.WARNING, logger="engine.pipeline.state_store"):
        out = cache(capsys, "list")
    assert out.splitlines()[0].startswith("dddddddddddd ") and "1 saved state," in out
    assert f"skipped saved state {DIGEST}: its sidecar could not be read (nested too deeply)" in caplog.text


def test_cache_clear_removes_a_nested_sidecar(folder, capsys):
    state, side = seed(folder, DIGEST, NESTED_JSON)
    assert cache(capsys, "clear").startswith("removed 1 saved state (")
    assert not state.exists() and not side.exists()


@pytest.mark.parametrize("digest", ["../../victim", "beside", "AB" * 16, "0" * 31])
def test_a_sidecar_naming_another_file_is_unreadable_and_clear_removes_nothing_else(folder, capsys, digest):
    outside = folder.parent.parent
    victims = [outside / "victim.json", outside / "victim.state"]
    for victim in victims:
        victim.write_text("the user's")
    if digest == "beside":  # an absolute path
        digest = str(outside / "victim")
    seed(folder, DIGEST, json.dumps(sidecar(digest)))
    cleared = cache(capsys, "clear")
    assert all(path.read_text() == "the user's" for path in victims)
    assert cleared.startswith("removed 1 saved state (")
    assert sorted(p.name for p in folder.iterdir()) == ["store.lock"]
    seed(folder, DIGEST, json.dumps(sidecar(digest)))
    assert "0 saved states," in cache(capsys, "list")


def test_a_sidecar_naming_another_state_stands_for_its_own_files(folder):
    """A copied sidecar: clearing its document removes the files under its name, not those it names."""
    other = seed(folder, OTHER, json.dumps(sidecar(OTHER, key={"document_sha256": "e" * 64})))
    copied = seed(folder, DIGEST, json.dumps(sidecar(OTHER, last_used=3.0)))
    store = StateStore(folder, cap_bytes(1))
    assert [e.digest for e in store.entries()] == [DIGEST, OTHER]
    assert store.clear("d" * 64) == (1, 1000)
    assert all(p.exists() for p in other) and not any(p.exists() for p in copied)


@pytest.mark.parametrize(
    "changes",
    [
        {"state_bytes": "1000"},
        {"state_bytes": -1},
        {"prefix_tokens": 1.5},
        {"last_used": "yesterday"},
        {"created": None},
        {"target_name": ["a"]},
        {"runtime": True},
        {"state_bytes": True},
        {"last_used": float("nan")},
    ],
    ids=repr,
)
def test_a_sidecar_with_a_field_of_the_wrong_kind_is_skipped(folder, capsys, changes):
    seed(folder, DIGEST, json.dumps(sidecar(**changes)))
    seed(folder, OTHER, json.dumps(sidecar(OTHER)))
    listing = json.loads(cache(capsys, "list", "--json"))
    assert [s["document_sha256"] for s in listing["states"]] == ["d" * 64]
    assert cache(capsys, "clear").startswith("removed 2 saved states (")


@pytest.mark.timeout(10)
def test_a_fifo_or_a_folder_as_a_sidecar_neither_hangs_nor_crashes(folder, capsys):
    os.mkfifo(folder / f"{DIGEST}.json")
    (folder / f"{OTHER}.json").mkdir()
    assert "0 saved states," in cache(capsys, "list")
    assert cache(capsys, "clear").startswith("removed ")
    assert not (folder / f"{DIGEST}.json").exists()


def test_files_the_store_did_not_name_are_left_alone(folder, capsys):
    notes, orphan = folder / "notes.json", folder / "notes.state"
    notes.write_text("{not json")
    orphan.write_bytes(b"kv")
    cache(capsys, "clear")
    assert notes.exists() and orphan.exists()


def test_cache_list_prints_no_control_characters(folder, capsys):
    key = {"document_sha256": f"{ESCAPES}{'d' * 64}"}
    seed(folder, DIGEST, json.dumps(sidecar(target_name=f"model{ESCAPES}\x9b", key=key)))
    out = cache(capsys, "list")
    assert "model\\x1b]0;pwned\\x07\\x1b[2J\\x9b" in out
    assert not any(ch in out for ch in "\x1b\x07\x9b")


@pytest.mark.timeout(10)
def test_a_fifo_as_a_state_file_is_refused_without_reading_it(tmp_path):
    store = StateStore(tmp_path / "states", cap_bytes(1))
    key = PrefixKey("d" * 64, ("t", 1, "x"), ("d", 1, "y"), "", 512, "auto")
    prefix = np.arange(4, dtype=np.int32)
    digest = key_digest(key)
    store.folder.mkdir()
    os.mkfifo(store.folder / f"{digest}.state")
    entry = sidecar(digest, key=key_json(key), tokens_sha256=tokens_sha256(prefix), state_bytes=0)
    entry["prefix_tokens"] = len(prefix)
    (store.folder / f"{digest}.json").write_text(json.dumps(entry))
    loaded = store.load(None, key, prefix)
    assert loaded.tokens == 0 and "not a regular file" in loaded.notice
