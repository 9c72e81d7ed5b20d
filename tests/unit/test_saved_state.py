"""Saved prefix states (engine.pipeline.state_store) on the tiny random target/draft pair.

The key properties: a new engine (a new process) answers from the state a cold prefill saved,
token for token as a cold prefill would; a damaged or someone else's state is discarded with a
notice and never loaded.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.core.errors import CacheError
from engine.core.events import Notice, RunFinished, TokenGenerated
from engine.core.hashing import sha256_file
from engine.core.paths import state_cache_dir
from engine.core.settings import ModelSettings, RunSettings
from engine.pipeline import DocumentSession, Engine
from engine.pipeline.state_store import StateStore, cap_bytes, key_digest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = " ".join(
    f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(8)
)
QUESTIONS = ["Which item is the green stone?", "Where are the stones?"]
SETTINGS = RunSettings(max_new_tokens=8)


@pytest.fixture
def store(engine, tmp_path, monkeypatch) -> StateStore:
    """An empty store in a cache of this test's own, which the engine (and any engine loaded now) uses."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fresh = StateStore(state_cache_dir(), cap_bytes(ModelSettings().state_cache_gb))
    monkeypatch.setattr(engine, "state_store", fresh)
    return fresh


def ask(engine, question=QUESTIONS[0], document=DOCUMENT, mode="baseline", **settings):
    """A new session's first question: (result, token texts, notices)."""
    events = list(
        engine.ask(DocumentSession(document), question, mode, RunSettings(max_new_tokens=8, **settings))
    )
    (result,) = [e.result for e in events if isinstance(e, RunFinished)]
    return (
        result,
        [e.text for e in events if isinstance(e, TokenGenerated)],
        [e.message for e in events if isinstance(e, Notice)],
    )


def cold_tokens(engine, question) -> list[str]:
    events = engine.stream(DOCUMENT, question, "baseline", SETTINGS)
    return [e.text for e in events if isinstance(e, TokenGenerated)]


def only_files(store: StateStore, document=DOCUMENT) -> tuple[Path, Path]:
    """The state and sidecar saved for the document (the only ones in the store)."""
    (entry,) = store.entries()
    assert entry.document_sha256 == DocumentSession(document).document_sha256
    return store.folder / f"{entry.digest}.state", store.folder / f"{entry.digest}.json"


def test_a_cold_prefill_saves_only_the_prefix(engine, store):
    result, _, notices = ask(engine)
    assert result.served_by == "cold_full" and not notices
    state, sidecar = only_files(store)
    saved = json.loads(sidecar.read_text())
    prompt = engine.prepare(DOCUMENT, QUESTIONS[0], SETTINGS)
    assert saved["prefix_tokens"] == prompt.tail_start < prompt.n_tokens
    assert saved["state_bytes"] == state.stat().st_size and saved["state_sha256"] == sha256_file(state)
    assert saved["target_name"] == engine.info.target_name


def test_a_new_engine_answers_from_the_saved_state_as_a_cold_prefill(engine, store, pair):
    ask(engine)
    target, draft = pair
    fresh = Engine.load(
        ModelSettings(target_path=target, draft_path=draft, n_ctx=512, n_batch=64, n_threads=1)
    )
    try:
        assert fresh.state_store.folder == store.folder
        saved, saved_tokens, notices = ask(fresh, QUESTIONS[1])  # another question: only the prefix is shared
        assert saved.served_by == "saved_state" and not notices
        prompt = fresh.prepare(DOCUMENT, QUESTIONS[1], SETTINGS)
        assert saved.prefill_tokens == prompt.n_tokens - prompt.tail_start
        assert saved_tokens == cold_tokens(fresh, QUESTIONS[1]) and saved.generated_tokens > 0
    finally:
        fresh.close()


def test_a_loaded_prefix_then_serves_follow_ups_from_memory(engine, store):
    ask(engine)
    session = DocumentSession(DOCUMENT)
    served = [
        next(
            e.result.served_by
            for e in engine.ask(session, q, "baseline", SETTINGS)
            if isinstance(e, RunFinished)
        )
        for q in QUESTIONS
    ]
    assert served == ["saved_state", "cached_full"]


def test_auto_answers_first_from_the_saved_state_when_there_is_one(engine, store):
    assert ask(engine, mode="auto", force=True)[0].served_by == "spec"  # nothing saved: SpecPrefill first
    ask(engine)  # a baseline answer saves the prefix
    again = ask(engine, mode="auto", force=True)[0]
    assert again.run == "baseline" and again.served_by == "saved_state"


def flip_bytes(state: Path, sidecar: Path) -> None:
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF
    state.write_bytes(bytes(data))


def truncate(state: Path, sidecar: Path) -> None:
    state.write_bytes(state.read_bytes()[:100])


def garble_sidecar(state: Path, sidecar: Path) -> None:
    sidecar.write_text("{not json")


def other_tokens(state: Path, sidecar: Path) -> None:
    saved = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**saved, "tokens_sha256": "0" * 64}))


def other_runtime(state: Path, sidecar: Path) -> None:
    saved = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**saved, "runtime": "llama-cpp-python 0.0.1"}))


@pytest.mark.parametrize(
    "damage, why",
    [
        (flip_bytes, "damaged"),
        (truncate, "bytes"),
        (garble_sidecar, "could not be read"),
        (other_tokens, "tokens differ"),
        (other_runtime, "saved by llama-cpp-python 0.0.1"),
    ],
)
def test_a_damaged_state_gets_a_notice_and_a_cold_prefill(engine, store, damage, why):
    _, cold, _ = ask(engine)
    state, sidecar = only_files(store)
    damage(state, sidecar)
    result, tokens, notices = ask(engine)
    assert result.served_by == "cold_full" and tokens == cold
    assert len(notices) == 1 and why in notices[0] and "prefilling" in notices[0]
    state, sidecar = only_files(store)  # the damaged one was discarded; the cold prefill saved a good one
    assert json.loads(sidecar.read_text())["state_sha256"] == sha256_file(state)
    assert ask(engine)[0].served_by == "saved_state"


def test_another_documents_state_is_never_loaded(engine, store):
    other = "Box 1 holds 7 coins. " * 12
    ask(engine)
    state, sidecar = only_files(store)
    # Someone else's files under this document's name: the sidecar's key gives them away.
    digest = key_digest(
        DocumentSession(other).key(
            engine.info.target_path,
            engine.info.draft_path,
            SETTINGS.system_prompt,
            engine.info.n_ctx,
            engine.info.flash_attn,
        )
    )
    shutil.copy(state, store.folder / f"{digest}.state")
    shutil.copy(sidecar, store.folder / f"{digest}.json")
    result, tokens, notices = ask(engine, document=other)
    assert result.served_by == "cold_full" and "another document" in notices[0]
    assert tokens == [
        e.text
        for e in engine.stream(other, QUESTIONS[0], "baseline", SETTINGS)
        if isinstance(e, TokenGenerated)
    ]


def test_another_system_prompt_has_a_state_of_its_own(engine, store):
    ask(engine)
    assert ask(engine, system_prompt="Answer in one word.")[0].served_by == "cold_full"
    assert len(store.entries()) == 2
    assert ask(engine)[0].served_by == "saved_state"


def test_the_least_recently_used_state_is_evicted_over_the_cap(engine, store):
    docs = [f"Document {k}. {DOCUMENT}" for k in (1, 2, 3)]
    for doc in docs[:2]:
        ask(engine, document=doc)
    sizes = [e.state_bytes for e in store.entries()]
    store.cap = sum(sizes) + min(sizes) // 2  # room for two states, not three
    assert ask(engine, document=docs[0])[0].served_by == "saved_state"  # the first is now the most recent
    ask(engine, document=docs[2])
    kept = {e.document_sha256 for e in store.entries()}
    assert kept == {DocumentSession(docs[0]).document_sha256, DocumentSession(docs[2]).document_sha256}
    assert (
        sorted(p.suffix for p in store.folder.glob("*.*") if p.suffix != ".lock")
        == [".json"] * 2 + [".state"] * 2
    )


def test_a_cap_of_zero_saves_and_loads_nothing(engine, store):
    store.cap = 0
    assert [ask(engine)[0].served_by for _ in range(2)] == ["cold_full", "cold_full"]
    assert not store.folder.exists() or not list(store.folder.glob("*.state"))


def test_a_state_over_the_cap_is_not_saved_and_says_so(engine, store):
    store.cap = 1
    result, _, notices = ask(engine)
    assert result.served_by == "cold_full" and "larger than the saved-state cache size" in notices[0]
    assert store.entries() == [] and not list(store.folder.glob("*.state"))


def test_an_unusable_cache_gives_notices_never_a_crash(engine, store, monkeypatch):
    _, cold, _ = ask(engine)

    def read_only():
        raise CacheError(f"cannot write to the cache folder {store.folder}: it is read-only")

    monkeypatch.setattr(store, "_lock", read_only)
    result, tokens, notices = ask(engine)
    assert result.served_by == "cold_full" and tokens == cold
    assert notices[0].startswith("saved state not used: cannot write") and "was not saved" in notices[1]


def test_one_shot_runs_save_nothing(engine, store):
    cold_tokens(engine, QUESTIONS[0])
    assert store.entries() == []


# -- specprefill cache / chat across processes ---------------------------------------------


def test_cache_list_and_clear(engine, store, capsys):
    ask(engine)
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    prompt = engine.prepare(DOCUMENT, QUESTIONS[0], SETTINGS)
    assert len(lines) == 2 and DocumentSession(DOCUMENT).document_sha256[:12] in lines[0]
    assert f"{prompt.tail_start} tokens" in lines[0] and engine.info.target_name in lines[0]
    assert lines[1].startswith("1 saved state,") and "of 4.00 GB" in lines[1]
    assert main(["cache", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["cap_bytes"] == 4 * 10**9 and listing["states"][0]["tokens"] == prompt.tail_start
    assert listing["total_bytes"] == listing["states"][0]["bytes"] > 0
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.startswith("removed 1 saved state (")
    assert store.entries() == [] and not list(store.folder.glob("*.state"))
    assert main(["cache", "list"]) == 0
    assert capsys.readouterr().out.startswith("0 saved states, 0.0 MB")


@pytest.mark.slow
def test_a_second_chat_process_answers_from_the_saved_state_a_damaged_one_says_so(pair, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text(DOCUMENT)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")
    target, draft = pair
    command = [
        sys.executable,
        "-m",
        "engine.cli",
        "chat",
        "--doc",
        str(doc),
        "--target",
        str(target),
        "--draft",
        str(draft),
        "--threads",
        "1",
        "--n-ctx",
        "512",
        "--max-new-tokens",
        "4",
        "--mode",
        "baseline",
        "--json",
        "--question",
        QUESTIONS[0],
    ]

    def chat() -> tuple[dict, str]:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout), proc.stderr

    answers = [chat()[0] for _ in range(2)]
    assert [a["served_by"] for a in answers] == ["cold_full", "saved_state"]
    assert answers[0]["answer"] == answers[1]["answer"]
    assert answers[1]["prefill_tokens"] < answers[1]["prompt_tokens"]
    (state,) = (tmp_path / "cache" / "specprefill" / "states").glob("*.state")
    flip_bytes(state, state.with_suffix(".json"))
    damaged, stderr = chat()
    assert damaged["served_by"] == "cold_full" and damaged["answer"] == answers[0]["answer"]
    assert "specprefill: notice: saved state not used: its file is damaged" in stderr


def test_a_state_saved_under_one_flash_attention_setting_is_not_used_under_the_other(engine, store, pair):
    # Flash attention lays the KV cache's values out differently, so the setting is part of the key.
    assert engine.info.flash_attn == "off"  # auto on the CPU
    ask(engine)
    target, draft = pair
    flash = Engine.load(
        ModelSettings(
            target_path=target, draft_path=draft, n_ctx=512, n_batch=64, n_threads=1, flash_attn="on"
        )
    )
    try:
        assert flash.info.flash_attn == "on" and flash.runtime.context.flash_attn == "on"
        result, _, notices = ask(flash)
        assert result.served_by == "cold_full" and not notices
        assert len(store.entries()) == 2  # one state per setting, side by side
    finally:
        flash.close()
