"""Faults while running, on the tiny GGUF engine: Cancel at each stage, a second run, llama_decode
errors, interrupted report writes, and no network access anywhere."""

from __future__ import annotations

import gc
import signal
import socket
import time
import weakref
from contextlib import contextmanager

import pytest

import engine.cli.ab
import engine.draft.scorer
from engine.core.cancel import CancelToken
from engine.core.errors import Cancelled, EngineBusyError, RuntimeFailure
from engine.core.events import Progress, RunFinished, StageChanged, TokenGenerated
from engine.core.settings import ModelSettings, RunSettings
from engine.ingest import load_document
from engine.pipeline import Engine
from tests.fixtures.pdfs import write_pdf
from tests.reliability.support import run_cli, tiny_model_flags

DOCUMENT = " ".join(
    f"Item {i} is the {['red', 'blue', 'green'][i % 3]} stone in the water." for i in range(8)
)
QUESTION = "Which item is the green stone?"
MAX_NEW = 24


def settings(**overrides) -> RunSettings:
    values = dict(force=True, keep=0.25, chunk_size=8, max_new_tokens=MAX_NEW)
    values.update(overrides)
    return RunSettings(**values)


def answers(engine, mode: str = "both") -> dict[str, str]:
    return {
        e.run: e.result.answer
        for e in engine.stream(DOCUMENT, QUESTION, mode, settings())
        if isinstance(e, RunFinished)
    }


# -- Cancel at each stage -----------------------------------------------------------------

CANCEL_POINTS = {
    "draft scoring": lambda e: isinstance(e, Progress) and e.stage == "draft",
    "target prefill": lambda e: isinstance(e, Progress) and e.stage == "prefill" and e.done < e.total,
    "decode": lambda e: isinstance(e, TokenGenerated) and e.index == 2,
}


@pytest.fixture
def live_draft_caches(monkeypatch):
    """The draft's KV caches still alive: a cancelled run must leave none behind."""
    alive: weakref.WeakSet = weakref.WeakSet()
    real = engine.draft.scorer.DynamicCache

    def tracked(*args, **kwargs):
        cache = real(*args, **kwargs)
        alive.add(cache)
        return cache

    monkeypatch.setattr(engine.draft.scorer, "DynamicCache", tracked)
    return alive


@pytest.mark.parametrize("point", CANCEL_POINTS)
def test_cancel_stops_at_once_frees_the_run_and_the_next_run_is_the_same(engine, live_draft_caches, point):
    reference = answers(engine)
    token = CancelToken()
    after_cancel = []
    with pytest.raises(Cancelled):
        for event in engine.stream(DOCUMENT, QUESTION, "spec", settings(), cancel=token):
            if token.cancelled:
                after_cancel.append(event)
            elif CANCEL_POINTS[point](event):
                token.cancel()
                cancelled_at = time.monotonic()
    assert time.monotonic() - cancelled_at < 1.0
    assert after_cancel == []  # not one more event once Cancel is pressed
    gc.collect()
    assert len(live_draft_caches) == 0
    assert answers(engine) == reference  # the KV cache holds nothing of the cancelled run


def test_cancel_from_another_thread_lands_within_a_second(engine):
    """The GUI cancels from its own thread: the engine's loops see it at their next check."""
    import threading

    token = CancelToken()
    outcome = {}
    longest_answer = settings(
        max_new_tokens=engine.info.n_ctx - engine.prepare(DOCUMENT, QUESTION, settings()).n_tokens
    )

    def run():
        try:
            for event in engine.stream(DOCUMENT, QUESTION, "both", longest_answer, cancel=token):
                if isinstance(event, StageChanged) and event.stage == "generating":
                    outcome.setdefault("generating", time.monotonic())
        except Cancelled:
            outcome["cancelled"] = time.monotonic()
        except Exception as e:  # reported by the assertion below, not lost in the thread
            outcome["error"] = e

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 10
    while "generating" not in outcome and time.monotonic() < deadline:
        time.sleep(0.001)
    token.cancel()
    pressed = time.monotonic()
    worker.join(5)
    assert not worker.is_alive() and "error" not in outcome, outcome
    assert outcome["cancelled"] - pressed < 1.0


# -- one run at a time -------------------------------------------------------------------


def test_a_second_run_while_one_is_active_is_refused_never_interleaved(engine):
    first = engine.stream(DOCUMENT, QUESTION, "baseline", settings())
    next(first)  # under way
    with pytest.raises(EngineBusyError, match="already in progress"):
        next(engine.stream(DOCUMENT, QUESTION, "baseline", settings()))
    first.close()  # the first run ends (here: abandoned) ...
    assert set(answers(engine)) == {"baseline", "spec"}  # ... and the engine takes the next one


# -- llama_decode errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "rc, words",
    [
        (1, "no room in the KV cache"),
        (-1, "rejected the batch"),
        (-2, "out of memory"),
        (-3, "compute backend failed"),
        (-7, "code -7"),
        (5, "warning code 5"),
    ],
)
def test_a_llama_decode_error_is_a_message_and_the_engine_goes_on(engine, monkeypatch, rc, words):
    reference = answers(engine, "baseline")
    monkeypatch.setattr(engine.runtime.context, "decode", lambda *args: rc)
    with pytest.raises(RuntimeFailure, match=words):
        list(engine.stream(DOCUMENT, QUESTION, "baseline", settings()))
    monkeypatch.undo()
    assert answers(engine, "baseline") == reference


# -- interrupted writes -----------------------------------------------------------------------


def test_an_interrupted_ab_suite_leaves_the_previous_report_intact(
    capsys, pair, cache_home, tmp_path, monkeypatch
):
    doc = tmp_path / "doc.txt"
    doc.write_text(DOCUMENT)
    suite = tmp_path / "suite.jsonl"
    suite.write_text(
        "".join(f'{{"id": "c{i}", "doc": "{doc}", "question": "{QUESTION}"}}\n' for i in range(3))
    )
    report = tmp_path / "ab.html"
    report.write_text("the previous report")
    progress_lines = []

    def interrupt_on_second_case(event):
        progress_lines.append(event)
        if getattr(event, "case_number", 1) == 2:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C: the CLI's handler cancels the suite

    monkeypatch.setattr(engine.cli.ab, "print_progress", interrupt_on_second_case)
    code, lines = run_cli(
        capsys,
        "ab",
        "--suite",
        str(suite),
        "--keep",
        "0.5",
        "--force",
        "--max-new-tokens",
        "4",
        "--report",
        str(report),
        *tiny_model_flags(*pair),
    )
    assert code == 130 and lines[-1] == "specprefill: cancelled"
    assert report.read_text() == "the previous report"
    # The report is untouched; what had finished is kept in the journal, for --resume.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ab.html",
        "ab.journal.jsonl",
        "doc.txt",
        "suite.jsonl",
    ]
    assert '"c0"' in (tmp_path / "ab.journal.jsonl").read_text()


# -- no network --------------------------------------------------------------------------------


@contextmanager
def network_forbidden():
    """Any attempt to open an internet socket, connect or resolve a name is recorded and fails."""
    attempts: list[str] = []

    def refuse(what: str):
        def fail(*args, **kwargs):
            attempts.append(f"{what}{args}")
            raise OSError(f"network access attempted: {what}")

        return fail

    real_init = socket.socket.__init__

    def guarded_init(self, family=-1, type=-1, proto=-1, fileno=None):
        if fileno is None and family in (-1, socket.AF_INET, socket.AF_INET6):
            refuse("socket")(family, type)
        real_init(self, family, type, proto, fileno)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "__init__", guarded_init)
        for name in ("create_connection", "getaddrinfo", "gethostbyname"):
            mp.setattr(socket, name, refuse(name))
        yield attempts


def test_the_engine_opens_no_socket(pair, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh-cache"))  # the draft is converted anew too
    target, draft = pair
    pdf = write_pdf(tmp_path / "doc.pdf", [DOCUMENT, "A second page."])
    with network_forbidden() as attempts:
        document = load_document(pdf)
        loaded = Engine.load(
            ModelSettings(target_path=target, draft_path=draft, n_ctx=512, n_batch=64, n_threads=1)
        )
        try:
            events = list(loaded.stream(document, QUESTION, "both", settings(max_new_tokens=4)))
        finally:
            loaded.close()
    assert attempts == []
    assert sum(isinstance(e, RunFinished) for e in events) == 2


def test_the_guard_does_catch_a_connection():
    with network_forbidden() as attempts, pytest.raises(OSError, match="network access attempted"):
        socket.create_connection(("example.org", 443), timeout=1)
    assert attempts and attempts[0].startswith("create_connection")
