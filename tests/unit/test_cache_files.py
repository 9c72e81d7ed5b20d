"""The files the app leaves on disk: their permissions, the saved states' upkeep, the A/B journal
under two writers, and the model identity that keys a saved state.

A saved state holds a document's token IDs, so the cache is the user's alone: its folders are
0700 and the state files 0600, those an earlier version left too. Any other file the app writes
follows the umask. A state whose sidecar cannot be read is removed, never left to grow the cache.
Two `ab` runs never share one journal. A saved state is keyed on the model's content, not its
path and size.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.core.atomic import write_text_atomic
from engine.core.events import RunFinished
from engine.core.paths import cache_dir, state_cache_dir
from engine.core.settings import ModelSettings, RunSettings
from engine.eval.journal import append_case, load_journal
from engine.eval.results import CaseRecord
from engine.models.defaults import DRAFT, TARGET
from engine.pipeline import DocumentSession
from engine.pipeline.state_store import StateStore, cap_bytes
from tests.fixtures.processes import run_at_once
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = " ".join(
    f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(8)
)
QUESTION = "Which item is the green stone?"
GARBAGE_SIDECAR = "{not json"
DIGEST = "0" * 32  # a state's file name, as a key digest would give it


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def cli(*args: str, cache_home: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home), HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def models_args(pair) -> list[str]:
    target, draft = pair
    return ["--target", str(target), "--draft", str(draft), "--threads", "1", "--n-ctx", "512"]


# -- new files follow the umask ---------------------------------------------------------------


def write_under_umask(path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        write_text_atomic(path, "report")
    finally:
        os.umask(previous)


@pytest.mark.parametrize("umask, expected", [(0o077, 0o600), (0o022, 0o644), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_the_umask_allows(tmp_path, umask, expected):
    path = tmp_path / "report.html"
    write_under_umask(path, umask)
    assert oct(mode_of(path)) == oct(expected)


def test_a_new_file_follows_the_umask_of_a_child_process(tmp_path):
    path = tmp_path / "child.txt"
    code = f"from engine.core.atomic import write_text_atomic; write_text_atomic({str(path)!r}, 'x')"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, umask=0o077, timeout=120)
    assert oct(mode_of(path)) == oct(0o600)


def test_an_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "shared.csv"
    path.write_text("old")
    path.chmod(0o640)
    write_under_umask(path, 0o077)
    assert oct(mode_of(path)) == oct(0o640) and path.read_text() == "report"


# -- the cache is the user's alone -------------------------------------------------------------


def seed_an_earlier_versions_cache(cache_home: Path) -> Path:
    """What an earlier version left: world-readable folders and state files."""
    root = cache_home / "specprefill"
    for folder in ("states", "models", "ab-journals", "draft/tiny-draft-old"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "states" / "store.lock").write_text("")
    (root / "ab-journals" / "suite-0123456789.journal.jsonl").write_text("{}\n")
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    root.chmod(0o755)
    cache_home.chmod(0o755)
    return root


def loose_modes(root: Path) -> list[str]:
    """Every folder under `root` (and it) that is not 0700, every state file that is not 0600."""
    loose = [f"{p} {oct(mode_of(p))}" for p in [root, *root.rglob("*")] if p.is_dir() and mode_of(p) != 0o700]
    loose += [f"{p} {oct(mode_of(p))}" for p in (root / "states").iterdir() if mode_of(p) != 0o600]
    return loose


@pytest.mark.slow
def test_after_a_chat_run_the_cache_is_owner_only_including_what_an_earlier_version_left(pair, tmp_path):
    cache_home = tmp_path / "xdg-cache"
    root = seed_an_earlier_versions_cache(cache_home)
    doc = tmp_path / "doc.txt"
    doc.write_text(DOCUMENT)
    proc = cli(
        "chat",
        "--doc",
        str(doc),
        *models_args(pair),
        "--max-new-tokens",
        "4",
        "--mode",
        "baseline",
        "--json",
        "--question",
        QUESTION,
        cache_home=cache_home,
    )
    assert proc.returncode == 0, proc.stderr
    assert list((root / "states").glob("*.state")), "the chat run saved no state"
    assert loose_modes(root) == []
    assert mode_of(cache_home) == 0o755  # the user's cache folder is not ours to change


def test_a_store_folder_an_earlier_version_left_is_tightened_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    folder = state_cache_dir()
    folder.mkdir(parents=True)
    old_state = folder / f"{'1' * 32}.state"
    old_state.write_bytes(b"kv")
    for path in (folder, folder.parent):
        path.chmod(0o755)
    old_state.chmod(0o644)
    StateStore(folder, cap_bytes(1)).entries()
    assert [oct(mode_of(p)) for p in (folder.parent, folder, old_state)] == [
        oct(0o700),
        oct(0o700),
        oct(0o600),
    ]
    assert mode_of(tmp_path / "xdg-cache") == 0o755


# -- a state whose sidecar cannot be read -----------------------------------------------------


def seed_unreadable_state(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    state, sidecar = folder / f"{DIGEST}.state", folder / f"{DIGEST}.json"
    state.write_bytes(b"\0" * 1000)
    sidecar.write_text(GARBAGE_SIDECAR)
    return state, sidecar


@pytest.mark.slow
def test_cache_clear_removes_a_state_whose_sidecar_cannot_be_read(tmp_path):
    cache_home = tmp_path / "xdg-cache"
    state, sidecar = seed_unreadable_state(cache_home / "specprefill" / "states")
    proc = cli("cache", "clear", cache_home=cache_home)
    assert proc.returncode == 0, proc.stderr
    assert not state.exists() and not sidecar.exists()
    assert proc.stdout.startswith("removed 1 saved state (")
    assert f"removed saved state {DIGEST}: its sidecar could not be read (" in proc.stderr


def test_clearing_the_store_logs_why_it_removed_a_state(tmp_path, caplog):
    store = StateStore(tmp_path / "states", cap_bytes(1))
    seed_unreadable_state(store.folder)
    with caplog.at_level(logging.WARNING, logger="engine.pipeline.state_store"):
        assert store.clear() == (1, 1000)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage().startswith(f"removed saved state {DIGEST}: its sidecar could not be read (")
    assert list(store.folder.iterdir()) == [store.folder / "store.lock"]


@pytest.fixture
def store(engine, tmp_path, monkeypatch) -> StateStore:
    """An empty store of this test's own, which the engine saves to."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    fresh = StateStore(state_cache_dir(), cap_bytes(ModelSettings().state_cache_gb))
    monkeypatch.setattr(engine, "state_store", fresh)
    return fresh


def test_a_save_evicts_a_state_whose_sidecar_cannot_be_read(engine, store):
    state, sidecar = seed_unreadable_state(store.folder)
    events = list(engine.ask(DocumentSession(DOCUMENT), QUESTION, "baseline", RunSettings(max_new_tokens=4)))
    (result,) = [e.result for e in events if isinstance(e, RunFinished)]
    assert result.served_by == "cold_full" and len(store.entries()) == 1
    assert not state.exists() and not sidecar.exists()


# -- the A/B journal ----------------------------------------------------------------------------

LONG_LINE_CHARS = 200_000  # a record far over PIPE_BUF and any stdio buffer
RECORDS_PER_WRITER = 40


def long_record(number: int) -> CaseRecord:
    return CaseRecord(
        f"{os.getpid()}-{number}",
        "other",
        "x" * LONG_LINE_CHARS,
        None,
        "doc.txt",
        None,
        None,
        {},
        error="the case failed",
    )


def append_long_records(barrier, path: str) -> int:
    barrier.wait()
    for number in range(RECORDS_PER_WRITER):
        append_case(Path(path), long_record(number))
    return RECORDS_PER_WRITER


def test_two_processes_appending_long_records_to_one_journal_lose_no_line(tmp_path):
    journal = tmp_path / "ab.journal.jsonl"
    journal.write_text(json.dumps({"journal": "specprefill-ab-journal/1"}) + "\n")
    results = run_at_once(append_long_records, str(journal))
    assert results == [("ok", str(RECORDS_PER_WRITER))] * 2
    records = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    assert len({record["id"] for record in records}) == len(records) == 2 * RECORDS_PER_WRITER


AB_CASES = 80  # enough that one run is still writing its journal when the other starts


def write_ab_suite(folder: Path) -> Path:
    (folder / "doc.txt").write_text(DOCUMENT)
    suite = folder / "suite.jsonl"
    cases = (
        {
            "id": f"case-{i}",
            "doc": "doc.txt",
            "question": f"Which item is {i}?",
            "answers": [str(i)],
            "kind": "number",
        }
        for i in range(AB_CASES)
    )
    suite.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return suite


@pytest.mark.slow
def test_two_ab_runs_on_one_suite_never_write_one_journal(pair, tmp_path):
    cache_home = tmp_path / "xdg-cache"
    suite = write_ab_suite(tmp_path)
    command = [
        sys.executable,
        "-m",
        "engine.cli",
        "ab",
        "--suite",
        str(suite),
        "--keep",
        "0.5",
        "--force",
        "--max-new-tokens",
        "1",
        *models_args(pair),
    ]
    env = dict(os.environ, XDG_CACHE_HOME=str(cache_home), HF_HUB_OFFLINE="1")
    runs = [
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outcomes = [(run.wait(timeout=300), run.communicate()[1]) for run in runs]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 2], [err[-2000:] for _, err in outcomes]
    refusal = next(err for code, err in outcomes if code == 2)
    assert "another ab run is writing the journal" in refusal
    (journal,) = (cache_home / "specprefill" / "ab-journals").glob("*.journal.jsonl")
    _, finished = load_journal(journal)
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + AB_CASES and sorted(finished) == sorted(f"case-{i}" for i in range(AB_CASES))


# -- the saved state's model identity ----------------------------------------------------------


def prefix_key(target: Path, draft: Path):
    return DocumentSession(DOCUMENT).key(target, draft, "system", 512, "off")


def replace_with_model(path: Path, seed: int) -> None:
    """A new version of the model at the same path, as an update would leave it."""
    staged = write_tiny_qwen2_gguf(path.with_name("staged.gguf"), seed=seed, name="tiny-target")
    os.replace(staged, path)


def test_two_models_of_one_size_at_one_path_key_their_states_apart(tmp_path):
    target, draft = tmp_path / "target.gguf", write_tiny_qwen2_gguf(tmp_path / "draft.gguf", seed=9)
    replace_with_model(target, seed=1)
    first = prefix_key(target, draft)
    size = target.stat().st_size
    replace_with_model(target, seed=2)
    assert target.stat().st_size == size  # same path, same size: only the weights differ
    assert prefix_key(target, draft) != first


def test_the_same_model_keys_the_same(tmp_path):
    target = write_tiny_qwen2_gguf(tmp_path / "target.gguf", seed=1)
    draft = write_tiny_qwen2_gguf(tmp_path / "draft.gguf", seed=2)
    assert prefix_key(target, draft) == prefix_key(target, draft)
    copy = tmp_path / "copy.gguf"
    copy.write_bytes(target.read_bytes())
    assert prefix_key(copy, draft).target[1:] == prefix_key(target, draft).target[1:]


def test_keying_the_default_models_is_cheap(monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    if not (TARGET.path.is_file() and DRAFT.path.is_file()):
        pytest.skip(f"the default models are not in {cache_dir()}")
    started = time.perf_counter()
    prefix_key(TARGET.path, DRAFT.path)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5, (
        f"{elapsed:.3f} s to key {TARGET.path.stat().st_size:,} + {DRAFT.path.stat().st_size:,} bytes"
    )
