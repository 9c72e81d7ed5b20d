"""Entry point: `specprefill-gui [PATH | --doc PATH] [--screenshot OUT.png ...]`.

PATH is how a desktop opens a file with the app (resources/desktop/specprefill.desktop:
`Exec=specprefill-gui %f`); it does what `--doc PATH` does.

This is the one place that binds the GUI to the real engine; everything below
receives its engine factory and document loader as arguments, so tests inject fakes.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from desktop.sessions.engine_host import EngineLike, ProgressFn
from desktop.sessions.settings_store import APPLICATION, ORGANIZATION, default_qsettings
from desktop.widgets.theme import THEME_SYSTEM, THEMES, apply_theme
from desktop.window.main_window import MainWindow
from desktop.window.screenshot import ScreenshotDirector, ShotPlan
from engine.api import (
    CancelToken,
    ModelSettings,
    app_version,
    icon_paths,
    load_document,
    load_engine,
    prepare_models,
)

log = logging.getLogger("desktop")

TAB_CHOICES = ("heatmap", "kept", "answers", "diff", "ab", "thread")
SCREENSHOT_SIZE = "1400x900"
DESKTOP_FILE_NAME = "specprefill"  # resources/desktop/specprefill.desktop


def load_real_engine(settings: ModelSettings, progress: ProgressFn, cancel: CancelToken) -> EngineLike:
    """Runs on the engine worker thread. On the first run the default models are not there yet:
    `prepare_models` assembles them, with the load dialog's progress. The load itself never
    downloads: a corrupt default model fails it, and the window offers `assemble_default_models`."""
    prepare_models(settings, progress, cancel)
    return load_engine(settings, progress, cancel)


def assemble_default_models(progress: ProgressFn, cancel: CancelToken) -> None:
    """Assemble again the default models that are missing or fail their hash (runs on the worker)."""
    prepare_models(ModelSettings(), progress, cancel, repair=True)


def load_real_document(path, *, password=None, cancel=None, progress=None):
    return load_document(path, password=password, cancel=cancel, progress=progress)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="specprefill-gui", description="SpecPrefill desktop document analyzer"
    )
    parser.add_argument("--version", action="version", version=f"specprefill-gui {app_version()}")
    parser.add_argument(
        "path", nargs="?", metavar="PATH", help="open this PDF, text file or code folder at start"
    )
    parser.add_argument("--doc", metavar="PATH", help="the same as PATH")
    parser.add_argument(
        "--screenshot", metavar="OUT.png", type=Path, help="save a PNG of the window and exit"
    )
    parser.add_argument(
        "--run-question", metavar="TEXT", help="with --screenshot: run a compare on --doc first"
    )
    parser.add_argument(
        "--screenshot-when",
        choices=("finished", "running"),
        default="finished",
        help="take the shot after the run finishes, or while SpecPrefill is generating",
    )
    parser.add_argument(
        "--tab",
        choices=TAB_CHOICES,
        help="which lower view is shown (heatmap = kept tokens, ab = the A/B test tab, "
        "thread = the document's questions and answers)",
    )
    parser.add_argument(
        "--size",
        help=f"window size, WIDTHxHEIGHT (--screenshot: {SCREENSHOT_SIZE}; "
        "otherwise the last session's size)",
    )
    parser.add_argument(
        "--theme",
        choices=THEMES,
        default=THEME_SYSTEM,
        help="light or dark (Fusion style), or the system's look; also for --screenshot",
    )
    parser.add_argument(
        "--show-about", action="store_true", help="with --screenshot: shoot the Help ▸ About box"
    )
    parser.add_argument(
        "--screenshot-answers",
        metavar="OUT.png",
        type=Path,
        help="with --screenshot: also save the two answer panes alone, at the same moment",
    )
    parser.add_argument("--screenshot-timeout", type=float, default=1800.0, metavar="SECONDS")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    options = parser.parse_args(argv)
    options.doc = _document_argument(parser, options)
    if options.run_question and not options.doc:
        parser.error("--run-question needs a document (PATH or --doc)")
    options.width, options.height = _parse_size(parser, options.size or SCREENSHOT_SIZE)
    return options


def _document_argument(parser: argparse.ArgumentParser, options: argparse.Namespace) -> str | None:
    """The document to open: PATH or --doc, never both."""
    if options.path and options.doc:
        parser.error("give the document once: as PATH or with --doc, not both")
    return options.doc or options.path


def _parse_size(parser: argparse.ArgumentParser, text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        parser.error(f"--size must look like 1400x900, not {text!r}")
    if width < 1000 or height < 650:
        parser.error("--size must be at least 1000x650")
    return width, height


def app_icon() -> QIcon:
    """Every size of the icon set shipped as package data (engine.api.icon_paths: the PNGs first,
    since a QIcon takes its engine from the first file and the pixmap engine reports exact sizes)."""
    icon = QIcon()
    for image in icon_paths():
        icon.addFile(str(image))
    return icon


def use_offscreen_if_headless(options: argparse.Namespace) -> None:
    """A screenshot needs no screen: without a display, render offscreen."""
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if options.screenshot and headless and sys.platform.startswith("linux"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def install_error_banner(window) -> None:
    """An exception escaping a slot is logged and shown in the banner; the app goes on."""

    def hook(exc_type, exc, tb) -> None:
        log.error("unhandled exception", exc_info=(exc_type, exc, tb))
        window.banner.show_error(f"Unexpected error: {exc_type.__name__}: {exc}")

    sys.excepthook = hook


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    configure_logging(options.verbose)
    use_offscreen_if_headless(options)  # before the QApplication: it reads the platform then
    app = QApplication(sys.argv[:1])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setDesktopFileName(DESKTOP_FILE_NAME)
    app.setWindowIcon(app_icon())
    apply_theme(app, options.theme)
    window = MainWindow(
        load_real_engine,
        loader=load_real_document,
        settings=default_qsettings(),
        assemble_models=assemble_default_models,
    )
    install_error_banner(window)
    if options.screenshot:
        return _run_screenshot(app, window, options)
    window.restore_layout()
    if options.size:  # asked for on the command line: wins over the remembered size
        window.resize(options.width, options.height)
    window.show()
    window.start()
    if options.doc:
        window.open_path(options.doc)
    return app.exec()


def _run_screenshot(app, window, options: argparse.Namespace) -> int:
    plan = ShotPlan(
        out=options.screenshot,
        document=options.doc,
        question=options.run_question,
        when=options.screenshot_when,
        tab=options.tab,
        width=options.width,
        height=options.height,
        timeout_s=options.screenshot_timeout,
        about=options.show_about,
        answers_out=options.screenshot_answers,
    )
    director = ScreenshotDirector(window, plan)
    director.done.connect(lambda code: (window.close(), app.exit(code)))
    director.begin()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
