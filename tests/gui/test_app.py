"""The entry point: CLI flags, how the real engine is built, screenshots, the last-resort error hook."""

from __future__ import annotations

import configparser
import inspect
import shlex
import sys
import types
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from desktop import app
from desktop.window.main_window import MainWindow
from desktop.window.screenshot import EXIT_OK, ScreenshotDirector, ShotPlan
from engine.core.resources import desktop_file_path
from engine.core.settings import ModelSettings
from tests.gui.conftest import fake_load_document


def test_cli_flags_parse():
    options = app.parse_args(
        [
            "--doc",
            "a.pdf",
            "--screenshot",
            "out.png",
            "--run-question",
            "Summarize this document",
            "--tab",
            "heatmap",
            "--screenshot-when",
            "running",
        ]
    )
    assert (options.doc, options.screenshot, options.run_question) == (
        "a.pdf",
        Path("out.png"),
        "Summarize this document",
    )
    assert (options.tab, options.screenshot_when, options.width, options.height) == (
        "heatmap",
        "running",
        1400,
        900,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--run-question", "q", "--screenshot", "x.png"],  # a question needs a document
        ["--size", "800x600"],  # too small for a useful screenshot
        ["--size", "wide"],
        ["--tab", "nowhere"],
        ["a.pdf", "--doc", "b.pdf"],  # the document once: PATH or --doc
    ],
)
def test_bad_cli_flags_are_rejected(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        app.parse_args(argv)
    assert exit_info.value.code == 2


@pytest.mark.parametrize("argv", [["notes.md"], ["--doc", "notes.md"]])
def test_a_path_argument_is_the_document_as_doc_is(argv):
    assert app.parse_args(argv).doc == "notes.md"
    assert app.parse_args([]).doc is None


def test_a_path_argument_can_be_screenshot_with_a_question():
    options = app.parse_args(["report.pdf", "--screenshot", "out.png", "--run-question", "Summarize"])
    assert (options.doc, options.run_question) == ("report.pdf", "Summarize")


def desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(desktop_file_path(), encoding="utf-8")
    return parser["Desktop Entry"]


@pytest.mark.parametrize("opened", [["/home/me/My Papers/report.pdf"], []])
def test_the_desktop_entry_passes_the_opened_file_as_the_document(opened):
    """A desktop expands %f to the one file or folder opened with the app, or to nothing from its menu."""
    command = shlex.split(desktop_entry()["Exec"])
    assert command[0] == "specprefill-gui" and command.count("%f") == 1
    argv = [arg for part in command[1:] for arg in (opened if part == "%f" else [part])]
    assert app.parse_args(argv).doc == (opened[0] if opened else None)


def test_the_desktop_entry_offers_the_app_for_the_documents_it_reads():
    mime_types = set(desktop_entry()["MimeType"].rstrip(";").split(";"))
    assert mime_types >= {
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/x-python",
        "inode/directory",
    }


def test_screenshot_without_a_display_goes_offscreen(monkeypatch):
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    app.use_offscreen_if_headless(app.parse_args(["--screenshot", "x.png"]))
    assert app.os.environ.get("QT_QPA_PLATFORM") == "offscreen"


def test_real_engine_is_built_by_engine_load_on_the_worker(monkeypatch):
    calls = []

    class FakePipelineEngine:
        @classmethod
        def load(cls, settings, progress=None, cancel=None):
            calls.append((settings, progress, cancel))
            return "engine"

    monkeypatch.setitem(sys.modules, "engine.pipeline", types.SimpleNamespace(Engine=FakePipelineEngine))
    monkeypatch.setattr(app, "prepare_models", lambda *args, **kwargs: None)
    progress, cancel, settings = object(), object(), ModelSettings()
    assert app.load_real_engine(settings, progress, cancel) == "engine"
    assert calls == [(settings, progress, cancel)]


def test_the_engine_signatures_the_gui_relies_on():
    """Pin the contract: a renamed parameter would otherwise only fail with real models."""
    pipeline = pytest.importorskip("engine.pipeline")  # needs torch and the llama runtime
    load = inspect.signature(pipeline.Engine.load).parameters
    assert {"settings", "progress", "cancel"} <= set(load)
    stream = inspect.signature(pipeline.Engine.stream).parameters
    assert {"document", "question", "mode", "settings", "cancel"} <= set(stream)
    info_fields = set(pipeline.EngineInfo.__dataclass_fields__)
    assert {
        "target_name",
        "draft_name",
        "target_path",
        "draft_path",
        "positions_supported",
        "device",
        "draft_memory_bytes",
        "n_ctx",
    } <= info_fields
    assert callable(pipeline.Engine.count_tokens) and callable(pipeline.Engine.close)


@pytest.fixture
def shot_window(qtbot, qsettings, engine_factory):
    window = MainWindow(engine_factory, loader=fake_load_document, settings=qsettings)
    qtbot.addWidget(window)
    return window


def run_director(qtbot, window, plan: ShotPlan, on_done=None) -> int:
    director = ScreenshotDirector(window, plan)
    codes = []
    director.done.connect(lambda code: (on_done and on_done(), codes.append(code)))
    director.begin()
    qtbot.waitUntil(lambda: bool(codes), timeout=8000)
    return codes[0]


def test_screenshot_after_a_compare_shows_answers_and_heatmap(qtbot, shot_window, long_pdf, tmp_path):
    out = tmp_path / "after.png"
    plan = ShotPlan(out=out, document=str(long_pdf), question="Summarize this document", tab="heatmap")
    assert run_director(qtbot, shot_window, plan) == EXIT_OK
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1400, 900)
    assert shot_window.spec_pane.result is not None and shot_window.baseline_pane.result is not None
    assert shot_window.tabs.currentWidget() is shot_window.kept_view
    assert shot_window.kept_view.spans


def test_screenshot_while_running_is_taken_mid_generation(
    qtbot, shot_window, long_pdf, tmp_path, fake_config
):
    fake_config.token_s = 0.05
    out = tmp_path / "running.png"
    seen = {}

    def capture_state():
        seen["active"] = shot_window.runs.is_active
        seen["spec_words"] = len(shot_window.spec_pane.answer.toPlainText().split())
        seen["spec_result"] = shot_window.spec_pane.result

    plan = ShotPlan(
        out=out, document=str(long_pdf), question="List the key points", when="running", tab="answers"
    )
    assert run_director(qtbot, shot_window, plan, on_done=capture_state) == EXIT_OK
    assert seen["active"] and seen["spec_result"] is None and seen["spec_words"] >= 5
    assert QImage(str(out)).width() >= 1000
    qtbot.waitUntil(lambda: not shot_window.runs.is_active, timeout=1000)  # cancelled once the shot was taken


def test_screenshot_of_a_loaded_document_without_a_run(qtbot, shot_window, long_pdf, tmp_path):
    out = tmp_path / "doc.png"
    assert run_director(qtbot, shot_window, ShotPlan(out=out, document=str(long_pdf))) == EXIT_OK
    assert QImage(str(out)).height() >= 650
    assert "tokens" in shot_window.doc_info.details.text() and shot_window.documents.tokens is not None


def test_screenshot_reports_an_error_in_its_exit_code(qtbot, shot_window, tmp_path):
    out = tmp_path / "err.png"
    code = run_director(qtbot, shot_window, ShotPlan(out=out, document=str(tmp_path / "missing.pdf")))
    assert code == 1 and out.exists()


def test_an_exception_escaping_a_slot_becomes_a_banner(shot_window, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    app.install_error_banner(shot_window)
    try:
        raise KeyError("lost")
    except KeyError:
        sys.excepthook(*sys.exc_info())
    assert shot_window.banner.kind == "error"
    assert "KeyError" in shot_window.banner.text
