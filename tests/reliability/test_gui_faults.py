"""The GUI under faults: broken default models (and the offer to re-assemble them), real bad
documents read by the engine's own loader, Cancel during ingestion, one run at a time, and no
model work on the GUI thread. The engine is the fake of tests/gui; the documents are real."""

from __future__ import annotations

import threading
import time

import pytest

from desktop.app import load_real_document
from engine.core.errors import DefaultModelsError, ModelError
from tests.fixtures.pdfs import encrypt_pdf, make_bomb_pdf, make_pdf, write_pdf
from tests.gui.conftest import FakeEngine, open_and_ask, page_text, wait_run_done

BROKEN = "default target model at /cache/target.gguf fails its sha256 check (corrupt or incomplete)"


def wait_banner(qtbot, window, kind: str = "error") -> str:
    qtbot.waitUntil(lambda: window.banner.kind == kind, timeout=5000)
    return window.banner.text


def window_with_notes(make_window, qtbot, tmp_path, n_chars: int = 2000):
    """A ready window with a text document open and a question typed."""
    doc = tmp_path / "notes.txt"
    doc.write_text(page_text(1, n_chars))
    return open_and_ask(make_window(), qtbot, doc, "What retries?")


# -- default models ---------------------------------------------------------------------------


def test_broken_default_models_offer_to_reassemble_them_off_the_gui_thread(make_window, qtbot, fake_config):
    fake_config.load_error, fake_config.load_error_type = BROKEN, DefaultModelsError
    assembled_on = []

    def assemble(progress, cancel):
        assembled_on.append(threading.current_thread())
        for part in range(1, 4):
            progress(part, 3, f"assembling part {part} of 3")
        fake_config.load_error = None  # the models are whole again

    window = make_window(wait_ready=False, assemble_models=assemble)
    assert "sha256" in wait_banner(qtbot, window)
    button = window.banner.action_button
    assert not button.isHidden() and button.text() == "Re-assemble default models"
    labels = []
    window.host.loadProgress.connect(lambda done, total, label: labels.append(label))
    button.click()
    qtbot.waitUntil(lambda: window.host.is_ready, timeout=5000)
    assert assembled_on and assembled_on[0] is not threading.main_thread()
    assert "assembling part 3 of 3" in labels
    assert window.banner.kind == "" and button.isHidden()


def test_a_failed_reassembly_is_a_message_too(make_window, qtbot, fake_config):
    fake_config.load_error, fake_config.load_error_type = BROKEN, DefaultModelsError

    def assemble(progress, cancel):
        raise ModelError("could not fetch the target model packages: no network")

    window = make_window(wait_ready=False, assemble_models=assemble)
    wait_banner(qtbot, window)
    window.banner.action_button.click()
    assert "could not fetch the target model packages" in wait_banner(qtbot, window)
    assert not window.host.is_ready


def test_other_model_errors_offer_no_reassembly(make_window, qtbot, fake_config):
    fake_config.load_error = "the draft (a.gguf) and the target (b.gguf) use different vocabularies"
    fake_config.load_error_type = ModelError
    window = make_window(wait_ready=False, assemble_models=lambda progress, cancel: None)
    assert "different vocabularies" in wait_banner(qtbot, window)
    assert window.banner.action_button.isHidden()


# -- real bad documents -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, data, expected",
    [
        ("junk.pdf", bytes(range(256)) * 64, "not a readable PDF"),
        ("scan.pdf", make_pdf([None, None]), "OCR is not part of this app"),
        ("bomb.pdf", make_bomb_pdf(16 << 20, text_pages=0), "decompression bomb"),
    ],
    ids=["random-bytes", "scan", "bomb"],
)
def test_a_bad_document_is_a_message_and_the_app_goes_on(make_window, qtbot, tmp_path, name, data, expected):
    window = make_window(loader=load_real_document)
    bad = tmp_path / name
    bad.write_bytes(data)
    window.open_path(str(bad))
    assert expected in wait_banner(qtbot, window)
    good = write_pdf(tmp_path / "good.pdf", ["A readable page."])
    window.open_path(str(good))
    qtbot.waitUntil(lambda: window.documents.document is not None, timeout=5000)
    assert window.documents.document.text == "A readable page."


def test_the_real_encrypted_pdf_messages_drive_the_password_prompt(make_window, qtbot, tmp_path):
    asked, typed = [], iter(["guess", "s3cret"])

    def ask(parent, path, wrong_before):
        asked.append(wrong_before)
        return next(typed)

    path = encrypt_pdf(make_pdf(["Confidential terms."]), tmp_path / "contract.pdf", user="s3cret")
    window = make_window(loader=load_real_document, ask_password=ask)
    window.open_path(str(path))
    qtbot.waitUntil(lambda: window.documents.document is not None, timeout=5000)
    assert asked == [False, True]  # asked, told the guess was wrong, asked again
    assert window.documents.document.text == "Confidential terms."


def test_giving_no_password_says_one_is_needed(make_window, qtbot, tmp_path):
    path = encrypt_pdf(make_pdf(["Terms."]), tmp_path / "locked.pdf", user="pw")
    window = make_window(loader=load_real_document, ask_password=lambda *a: None)
    window.open_path(str(path))
    assert "a password is needed to open it" in wait_banner(qtbot, window)


def test_cancel_while_reading_a_1200_page_pdf(make_window, qtbot, tmp_path):
    path = write_pdf(tmp_path / "manual.pdf", [page_text(n, 400) for n in range(1, 1201)])
    window = make_window(loader=load_real_document)
    window.open_path(str(path))
    qtbot.waitUntil(lambda: window.doc_info.progress.value() >= 5, timeout=5000)
    started = time.monotonic()
    window.controls.cancel_button.click()
    qtbot.waitUntil(lambda: not window.documents.is_loading, timeout=1000)
    assert time.monotonic() - started < 1.0
    assert "cancelled" in window.doc_info.title.text() and window.documents.document is None


# -- runs ------------------------------------------------------------------------------------


def test_model_work_never_runs_on_the_gui_thread_and_runs_never_overlap(
    make_window, qtbot, tmp_path, monkeypatch, engine_factory, fake_config
):
    threads = []
    for method in ("stream", "ask", "ask_both", "count_tokens"):
        real = getattr(FakeEngine, method)

        def spy(self, *args, _real=real, **kwargs):
            threads.append(threading.current_thread())
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(FakeEngine, method, spy)
    fake_config.draft_steps, fake_config.draft_step_s = 40, 0.01
    window = window_with_notes(make_window, qtbot, tmp_path, n_chars=30_000)
    assert window.start_run("both")
    assert not window.start_run("spec") and not window.start_run("both")  # refused while one is active
    wait_run_done(qtbot, window)
    assert len(engine_factory.engine.requests) == 1
    assert threads and all(t is not threading.main_thread() for t in threads)


@pytest.mark.parametrize(
    "fault, shown",
    [
        ("fail_stage", "fake failure during prefill"),  # an error the engine reports (SpecPrefillError)
        ("crash_stage", "Unexpected error in baseline run: RuntimeError: fake crash during prefill"),  # a bug
    ],
)
def test_a_failing_run_is_a_message_and_the_next_run_works(
    make_window, qtbot, tmp_path, fake_config, fault, shown
):
    window = window_with_notes(make_window, qtbot, tmp_path)
    setattr(fake_config, fault, "prefill")
    window.start_run("baseline")
    assert wait_banner(qtbot, window) == shown
    wait_run_done(qtbot, window)
    setattr(fake_config, fault, None)
    window.start_run("baseline")
    wait_run_done(qtbot, window)
    assert window.baseline_pane.result is not None and window.banner.kind == ""


def test_the_truncate_setting_reaches_the_engine(make_window, qtbot, tmp_path, engine_factory):
    window = window_with_notes(make_window, qtbot, tmp_path)
    dialog = window.open_settings()
    assert not dialog.truncate.isChecked()
    dialog.truncate.setChecked(True)
    dialog.accept()
    window.start_run("baseline")
    wait_run_done(qtbot, window)
    assert engine_factory.engine.requests[-1]["settings"].truncate is True
    assert window.store.run_preferences().truncate is True
