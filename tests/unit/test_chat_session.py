"""Document sessions (Engine.ask) and `specprefill chat`, on the tiny random target/draft pair.

The key property: an answer served from the cached prefix is the answer a cold full prefill
of the same prompt gives, token for token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled
from engine.core.events import RunFinished, StageChanged, TokenGenerated
from engine.core.settings import RunSettings
from engine.pipeline import DocumentSession

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = " ".join(
    f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(8)
)
OTHER_DOCUMENT = " ".join(f"Box {i} holds {i * 7} coins." for i in range(10))
QUESTIONS = ["Which item is the green stone?", "Where are the stones?", "What colour is item 4?"]
MAX_NEW = 8


def settings(**overrides) -> RunSettings:
    values = dict(keep=0.25, chunk_size=8, max_new_tokens=MAX_NEW)
    values.update(overrides)
    return RunSettings(**values)


def answer(events) -> tuple[object, list[str]]:
    """The run's result and the text of each token it generated."""
    events = list(events)
    results = [e.result for e in events if isinstance(e, RunFinished)]
    assert len(results) == 1
    return results[0], [e.text for e in events if isinstance(e, TokenGenerated)]


def ask(engine, session, question, mode="baseline", **overrides):
    return answer(engine.ask(session, question, mode, settings(**overrides)))[0]


def served(engine, session, questions, mode="baseline", **overrides) -> list[str]:
    return [ask(engine, session, q, mode, **overrides).served_by for q in questions]


@pytest.fixture(autouse=True)
def no_saved_states(engine, monkeypatch):
    """These tests are about the prefix in memory: saved states (test_saved_state.py) stay off."""
    monkeypatch.setattr(engine, "state_store", None)


@pytest.fixture
def extends(engine, monkeypatch):
    """Records what the target prefills on top of its KV cache."""
    calls = []
    prefix_runtime = engine._prefix_runtime()  # sessions' full prefixes live in this context
    iter_extend = prefix_runtime.iter_extend

    def spy(tokens, positions, cancel, split=0):
        calls.append((np.array(tokens), np.array(positions)))
        return (yield from iter_extend(tokens, positions, cancel, split))

    monkeypatch.setattr(prefix_runtime, "iter_extend", spy)
    return calls


def test_a_cached_follow_up_answers_as_a_cold_full_prefill(engine, extends):
    session = DocumentSession(DOCUMENT)
    ask(engine, session, QUESTIONS[0])
    cached, cached_tokens = answer(engine.ask(session, QUESTIONS[1], "baseline", settings()))
    cold, cold_tokens = answer(engine.stream(DOCUMENT, QUESTIONS[1], "baseline", settings()))
    assert cached.served_by == "cached_full" and cold.served_by == ""
    assert cached_tokens == cold_tokens and cached.answer == cold.answer
    assert cached.generated_tokens == cold.generated_tokens > 0
    # Only the question's tail was prefilled, at its own positions right after the prefix.
    prompt = engine.prepare(DOCUMENT, QUESTIONS[1], settings())
    ((tokens, positions),) = extends
    assert np.array_equal(tokens, prompt.tokens[prompt.tail_start :])
    assert np.array_equal(positions, np.arange(prompt.tail_start, prompt.n_tokens))
    assert (
        cached.prefill_tokens == prompt.n_tokens - prompt.tail_start < cached.prompt_tokens == prompt.n_tokens
    )


def test_the_same_question_again_is_answered_the_same_from_the_cache(engine):
    session = DocumentSession(DOCUMENT)
    first = ask(engine, session, QUESTIONS[0])
    again = ask(engine, session, QUESTIONS[0])
    assert (first.served_by, again.served_by) == ("cold_full", "cached_full")
    assert again.answer == first.answer


def test_baseline_mode_is_cold_once_then_cached(engine):
    session = DocumentSession(DOCUMENT)
    assert session.full_prefix_tokens == 0
    assert served(engine, session, QUESTIONS) == ["cold_full", "cached_full", "cached_full"]
    prompt = engine.prepare(DOCUMENT, QUESTIONS[0], settings())
    assert session.full_prefix_tokens == prompt.tail_start and session.answered == 3


def test_a_spec_run_in_between_keeps_the_prefix(engine):
    session = DocumentSession(DOCUMENT)
    assert served(engine, session, QUESTIONS[:1]) == ["cold_full"]
    assert served(engine, session, QUESTIONS[1:2], "spec", force=True)[0].startswith("spec")
    held = session.full_prefix_tokens
    assert held > 0  # the kept tokens went to the main context: the prefix context still holds the document
    assert served(engine, session, QUESTIONS[2:]) == ["cached_full"]


def test_a_one_shot_run_in_between_keeps_the_prefix(engine):
    session = DocumentSession(DOCUMENT)
    assert served(engine, session, QUESTIONS[:1]) == ["cold_full"]
    answer(engine.stream(DOCUMENT, QUESTIONS[1], "baseline", settings()))
    assert served(engine, session, QUESTIONS[1:]) == ["cached_full", "cached_full"]


def test_a_cleared_prefix_context_is_never_reused(engine):
    session = DocumentSession(DOCUMENT)
    assert served(engine, session, QUESTIONS[:1]) == ["cold_full"]
    engine._prefix_runtime().context.clear()  # whatever clears it (another document, a failed load...)
    assert session.full_prefix_tokens == 0
    assert served(engine, session, QUESTIONS[1:]) == ["cold_full", "cached_full"]


def test_a_run_cancelled_in_its_prefill_leaves_no_prefix_to_reuse(engine):
    session = DocumentSession(DOCUMENT)
    assert served(engine, session, QUESTIONS[:1]) == ["cold_full"]
    cancel = CancelToken()
    with pytest.raises(Cancelled):
        for event in engine.ask(session, QUESTIONS[1], "baseline", settings(), cancel):
            if isinstance(event, StageChanged) and event.stage == "prefill":
                cancel.cancel()
    assert session.full_prefix_tokens == 0
    assert served(engine, session, QUESTIONS[1:]) == ["cold_full", "cached_full"]


def test_another_document_is_cold_and_invalidates_the_first(engine):
    first, other = DocumentSession(DOCUMENT), DocumentSession(OTHER_DOCUMENT)
    assert served(engine, first, QUESTIONS[:1]) == ["cold_full"]
    assert served(engine, other, QUESTIONS[:1]) == ["cold_full"]
    assert served(engine, first, QUESTIONS[1:2]) == ["cold_full"]


def test_a_changed_system_prompt_is_cold(engine):
    session = DocumentSession(DOCUMENT)
    assert served(engine, session, QUESTIONS[:1]) == ["cold_full"]
    terse = "Answer in one word."
    assert served(engine, session, QUESTIONS[1:], system_prompt=terse) == ["cold_full", "cached_full"]
    assert served(engine, session, QUESTIONS[:1]) == ["cold_full"]  # back to the default: cold again


def test_auto_without_the_background_fill_answers_first_by_specprefill_then_from_the_full_prefix(engine):
    session = DocumentSession(DOCUMENT)
    first = ask(engine, session, QUESTIONS[0], "auto", force=True, background_prefill=False)
    assert (
        first.run == "spec" and first.served_by in ("spec", "spec_cached_draft") and first.kept_fraction < 1
    )
    assert served(engine, session, QUESTIONS[1:], "auto", force=True, background_prefill=False) == [
        "cold_full",
        "cached_full",
    ]


def test_auto_with_the_background_fill_answers_by_specprefill_until_the_prefix_is_filled(engine):
    session = DocumentSession(OTHER_DOCUMENT)
    assert served(engine, session, QUESTIONS[:2], "auto", force=True) == ["spec", "spec_cached_draft"]
    ended = list(engine.background_prefill(session, settings(force=True)))[-1]
    assert ended.status == "done" and session.full_prefix_tokens == ended.total > 0
    assert served(engine, session, QUESTIONS[2:], "auto", force=True) == ["cached_full"]


def test_a_bypassed_spec_run_fills_the_prefix_like_baseline(engine):
    session = DocumentSession(DOCUMENT)  # far below the default SpecPrefill threshold
    first = ask(engine, session, QUESTIONS[0], "auto")
    assert first.run == "spec" and first.bypassed and first.served_by == "cold_full"
    assert served(engine, session, QUESTIONS[1:], "spec") == ["cached_full", "cached_full"]


def test_one_shot_json_has_no_served_by(engine):
    result, _ = answer(engine.stream(DOCUMENT, QUESTIONS[0], "baseline", settings()))
    assert "served_by" not in result.to_json()
    session_result = ask(engine, DocumentSession(DOCUMENT), QUESTIONS[0])
    assert session_result.to_json()["served_by"] == "cold_full"


def test_an_unknown_session_mode_is_refused(engine):
    with pytest.raises(ValueError, match="session mode"):
        ask(engine, DocumentSession(DOCUMENT), QUESTIONS[0], "both")


# -- specprefill chat ---------------------------------------------------------------


@pytest.fixture(scope="module")
def chat(pair, tmp_path_factory):
    home = tmp_path_factory.mktemp("chat")
    doc = home / "doc.txt"
    doc.write_text(DOCUMENT)
    env = dict(os.environ, XDG_CACHE_HOME=str(home / "cache"), HF_HUB_OFFLINE="1")
    target, draft = pair
    base = [
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
        "--state-cache-gb",
        "0",
    ]

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "engine.cli", *base, *args],
            cwd=ROOT,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def start(*args: str) -> subprocess.Popen:
        """The chat process with pipes, for a conversation at its own pace."""
        return subprocess.Popen(
            [sys.executable, "-m", "engine.cli", *base, *args],
            cwd=ROOT,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    run.start = start
    return run


@pytest.mark.slow
def test_chat_json_prints_one_object_per_question(chat):
    proc = chat("--mode", "baseline", "--json", *(arg for q in QUESTIONS for arg in ("--question", q)))
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["question"] for a in answers] == QUESTIONS
    assert [a["served_by"] for a in answers] == ["cold_full", "cached_full", "cached_full"]
    for a in answers:
        for key in (
            "ttft_s",
            "answer",
            "prefill_tokens",
            "prompt_tokens",
            "decode_tok_s",
            "generated_tokens",
            "target_prefill_s",
            "stop_reason",
        ):
            assert key in a
    assert answers[0]["prefill_tokens"] == answers[0]["prompt_tokens"]
    assert answers[1]["prefill_tokens"] < answers[1]["prompt_tokens"]


@pytest.mark.slow
def test_chat_reads_questions_from_stdin_and_auto_starts_with_spec(chat):
    proc = chat(
        "--force",
        "--keep",
        "0.3",
        "--chunk-size",
        "8",
        "--json",
        "--no-background-prefill",
        "--no-read-ahead",
        stdin="\n".join(QUESTIONS) + "\n\n",
    )
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["served_by"] for a in answers] == ["spec", "cold_full", "cached_full"]
    assert answers[0]["positions"] == "restore" and "kept_fraction" not in answers[1]


@pytest.mark.slow
def test_chat_prints_readable_blocks(chat):
    proc = chat("--mode", "baseline", "--question", QUESTIONS[0], "--question", QUESTIONS[1])
    assert proc.returncode == 0, proc.stderr
    assert f"Q1: {QUESTIONS[0]}" in proc.stdout and f"Q2: {QUESTIONS[1]}" in proc.stdout
    assert "served by cold_full" in proc.stdout and "served by cached_full" in proc.stdout


@pytest.mark.slow
def test_chat_without_questions_is_one_line_exit_2(chat):
    proc = chat("--json", stdin="\n  \n")
    assert proc.returncode == 2 and "no questions" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_chat_fills_the_full_prefix_while_waiting_for_the_next_question(chat):
    proc = chat.start("--force", "--keep", "0.3", "--chunk-size", "8", "--json", "--no-read-ahead")
    killer = threading.Timer(240, proc.kill)  # a hang fails the test instead of stalling the suite
    killer.start()
    try:
        proc.stdin.write(QUESTIONS[0] + "\n")
        proc.stdin.flush()
        first = json.loads(proc.stdout.readline())
        ended = ""
        while "[background]" not in ended:  # the fill's one line, once it has finished
            ended = proc.stderr.readline()
            assert ended, "chat ended without a background fill"
        proc.stdin.write(QUESTIONS[1] + "\n")
        proc.stdin.close()
        second = json.loads(proc.stdout.readline())
        assert proc.wait(60) == 0
    finally:
        killer.cancel()
    assert "done" in ended
    assert (first["served_by"], second["served_by"]) == ("spec", "cached_full")


@pytest.mark.slow
def test_chat_reads_ahead_before_the_first_question_and_reports_it(chat):
    proc = chat(
        "--force",
        "--keep",
        "0.3",
        "--chunk-size",
        "8",
        "--json",
        "--mode",
        "spec",
        "--question",
        QUESTIONS[0],
        "--question",
        QUESTIONS[1],
    )
    assert proc.returncode == 0, proc.stderr
    first, second = [json.loads(line) for line in proc.stdout.splitlines()]
    assert first["served_by"] == "spec_read_ahead" and first["read_ahead_s"] > 0
    assert second["served_by"] == "spec_cached_draft" and second["read_ahead_s"] == 0.0
    assert "[read-ahead] document" in proc.stderr and ", done (" in proc.stderr


@pytest.mark.slow
def test_chat_reads_ahead_while_it_waits_on_stdin(chat):
    proc = chat.start("--force", "--keep", "0.3", "--chunk-size", "8", "--json", "--no-background-prefill")
    killer = threading.Timer(240, proc.kill)
    killer.start()
    try:
        ended = proc.stderr.readline()
        while "[read-ahead]" not in ended:  # asked only once the draft has read the document
            ended = proc.stderr.readline()
            assert ended, "chat ended without a read-ahead"
        proc.stdin.write(QUESTIONS[0] + "\n")
        proc.stdin.close()
        answer = json.loads(proc.stdout.readline())
        assert proc.wait(60) == 0
    finally:
        killer.cancel()
    assert "done" in ended
    assert answer["served_by"] == "spec_read_ahead" and answer["read_ahead_s"] > 0
