"""Copy and Save an answer, Markdown rendering with a plain-text toggle that is remembered."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from desktop.model.answer_export import run_facts, suggested_file_name
from desktop.widgets import run_pane
from desktop.widgets.run_pane import RunPane
from desktop.window.main_window import MainWindow
from engine.core.events import RunFinished, StageChanged, TokenGenerated
from tests.gui.conftest import SPEC_ANSWER, fake_load_document, wait_run_done
from tests.gui.test_panes import result

MARKDOWN_ANSWER = "## Steps\n\n1. Open the **port** file\n2. Run `make`\n"


@pytest.fixture
def pane(qtbot) -> RunPane:
    pane = RunPane("spec", "SpecPrefill")
    qtbot.addWidget(pane)
    pane.begin(max_new_tokens=10, question="How do I build it?", document_name="guide.pdf")
    return pane


def finish(pane: RunPane, answer: str = MARKDOWN_ANSWER) -> None:
    pane.apply(StageChanged("spec", "generating"))
    pane.apply(TokenGenerated("spec", answer, 0))
    pane.apply(RunFinished("spec", result(answer=answer, ttft=1.25)))


def compare(window, qtbot) -> None:
    """Run a compare and wait for it, and for the agreement computed from it on a worker."""
    window.start_run("both")
    wait_run_done(qtbot, window)
    qtbot.waitUntil(lambda: not window.comparison.agreement_pending, timeout=3000)


def test_streaming_answer_is_plain_and_the_finished_one_renders_markdown(pane):
    pane.apply(StageChanged("spec", "generating"))
    pane.apply(TokenGenerated("spec", "## Steps\n\n1. Open the **port**", 0))
    assert "**port**" in pane.answer.toPlainText()  # still plain while streaming
    pane.apply(RunFinished("spec", result(answer=MARKDOWN_ANSWER)))
    shown = pane.answer.toPlainText()
    assert "port" in shown and "**" not in shown and "##" not in shown
    assert pane.answer_text == MARKDOWN_ANSWER  # the source is kept for Copy, Save and the diff


def test_plain_text_toggle_shows_the_source(pane):
    finish(pane)
    pane.markdown_button.click()
    assert not pane.renders_markdown
    assert pane.answer.toPlainText() == MARKDOWN_ANSWER
    pane.markdown_button.click()
    assert "**" not in pane.answer.toPlainText()


def test_copy_puts_the_answer_source_on_the_clipboard(pane):
    assert not pane.copy_button.isEnabled() and not pane.save_button.isEnabled()
    finish(pane)
    assert pane.copy_button.isEnabled()
    pane.copy_button.click()
    assert QApplication.clipboard().text() == MARKDOWN_ANSWER


def test_save_writes_question_answer_and_run_facts(pane, tmp_path, monkeypatch):
    out = tmp_path / "answer.md"
    asked = []
    monkeypatch.setattr(run_pane, "ask_save_path", lambda parent, name: asked.append(name) or str(out))
    finish(pane)
    assert pane.save_button.isEnabled()
    pane.save_button.click()
    text = out.read_text(encoding="utf-8")
    assert asked == ["answer-spec-how-do-i-build-it.md"]
    assert text.startswith("# SpecPrefill\n")
    assert "## Question\n\nHow do I build it?" in text and "`guide.pdf`" in text
    assert MARKDOWN_ANSWER.strip() in text
    assert "TTFT 1.25 s · prefill 1,600 of 8,000 tokens · kept 20% · positions restore" in text


def test_save_cancelled_writes_nothing(pane, tmp_path, monkeypatch):
    monkeypatch.setattr(run_pane, "ask_save_path", lambda parent, name: None)
    finish(pane)
    assert pane.save_answer() is None
    assert list(tmp_path.iterdir()) == []


def test_save_failure_is_reported_not_raised(pane, tmp_path, monkeypatch):
    monkeypatch.setattr(run_pane, "ask_save_path", lambda parent, name: str(tmp_path / "missing" / "a.md"))
    finish(pane)
    failures = []
    pane.saveFailed.connect(failures.append)
    assert pane.save_answer() is None
    assert failures and "Could not save the answer" in failures[0]


def test_run_facts_of_a_bypassed_run():
    facts = run_facts(result(bypassed=True, positions="contiguous", prefill_tokens=8000))
    assert "kept 100% (bypassed)" in facts and "prefill 8,000 of 8,000" in facts
    assert suggested_file_name("baseline", "What's the port?!") == "answer-baseline-what-s-the-port.md"


def test_window_saves_an_answer_after_a_compare(loaded_window, qtbot, tmp_path, monkeypatch):
    out = tmp_path / "spec.md"
    monkeypatch.setattr(run_pane, "ask_save_path", lambda parent, name: str(out))
    compare(loaded_window, qtbot)
    loaded_window.spec_pane.save_button.click()
    text = out.read_text(encoding="utf-8")
    assert "Summarize this document" in text and SPEC_ANSWER in text and "`report.pdf`" in text


def test_markdown_toggle_is_shared_and_remembered(loaded_window, qtbot, qsettings, engine_factory):
    window = loaded_window
    compare(window, qtbot)
    window.spec_pane.markdown_button.click()  # off in one pane: off in both
    assert not window.spec_pane.renders_markdown and not window.baseline_pane.renders_markdown
    again = MainWindow(engine_factory, loader=fake_load_document, settings=qsettings)
    qtbot.addWidget(again)
    assert not again.spec_pane.renders_markdown and not again.baseline_pane.renders_markdown


def test_run_facts_of_a_truncated_full_prefill_keep_the_caveat():
    facts = run_facts(
        result(
            run="baseline",
            kept_fraction=1.0,
            positions="contiguous",
            fit="truncated",
            seen_fraction=0.52,
            document_tokens=62114,
        )
    )
    assert facts.endswith("positions contiguous · truncated: saw 52% of the document")
    assert "saw" not in run_facts(result())  # a run that saw it all says nothing more
