"""Help ▸ About, the --theme flag, and highlights that stay readable in a dark theme."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication, QLabel

from desktop import app
from desktop.widgets import about, heat_colors
from desktop.widgets.answer_diff import DIFF_STYLES
from desktop.widgets.error_banner import ErrorBanner, banner_style
from desktop.widgets.kept_view import KeptTokenView, legend_html
from desktop.widgets.theme import MIN_CONTRAST, THEME_DARK, apply_theme, contrast_ratio, text_css, text_on
from desktop.window.screenshot import EXIT_OK, ShotPlan
from engine.core.about import APP_NAME, app_version
from engine.core.credits import CREDITS
from engine.core.settings import RunSettings
from engine.ingest.document import Document
from tests.gui.conftest import build_prompt, make_selection
from tests.gui.test_app import run_director, shot_window  # noqa: F401  (a fixture)
from tests.gui.test_kept_view import numbered_text, three_pages

_CSS_PAIR = re.compile(r"background:\s*(#[0-9a-fA-F]{6})[^{}]*?color:\s*(#[0-9a-fA-F]{6})")


@pytest.fixture
def dark_app():
    """The dark theme on the shared QApplication, put back afterwards."""
    qapp = QApplication.instance()
    style, palette = qapp.style().name(), qapp.palette()
    apply_theme(qapp, THEME_DARK)
    yield qapp
    qapp.setStyle(style)
    qapp.setPalette(palette)


# --- About -----------------------------------------------------------------------------------------


def test_about_names_the_app_versions_models_and_licences(window, qtbot):
    box = window.show_about()
    qtbot.addWidget(box)
    text = box.text()
    assert f"{APP_NAME} {app_version()}" in text
    for label in ("Python", "PySide6 / Qt", "torch", "llama-cpp-python"):
        assert f"{label}:" in text
    assert "FakeTarget-1.5B" in text and "FakeDraft-0.5B" in text  # from the loaded engine's info
    for notice in CREDITS:
        assert f"{html.escape(notice.name)}:&nbsp;</td><td>{html.escape(notice.licence)}" in text
    assert "Qwen2.5-Coder-1.5B-Instruct" in text and "Apache-2.0" in text and "LGPL-3.0-only" in text
    assert box.isVisible()


def test_about_reads_versions_from_metadata_and_says_what_is_missing():
    facts = dict(about.version_facts())
    assert facts["llama-cpp-python"] == about.package_version("llama-cpp-python")
    assert about.package_version("no-such-distribution-here") == about.NOT_INSTALLED
    assert dict(about.model_facts(None)) == {
        "Target model": about.NOT_LOADED,
        "Draft model": about.NOT_LOADED,
    }


def test_about_names_the_drafts_number_format_and_why():
    from types import SimpleNamespace

    info = SimpleNamespace(
        target_name="T",
        draft_name="D",
        cpu_path="",
        draft_precision="int8",
        draft_precision_reason="measured",
    )
    assert dict(about.model_facts(info))["Draft precision"] == "int8 (measured)"
    assert dict(about.model_facts(SimpleNamespace(target_name="T", draft_name="D")))["Draft precision"] == (
        "not recorded"
    )


def test_help_menu_has_about(window):
    menus = {action.text(): action.menu() for action in window.menuBar().actions()}
    assert window.about_action in menus["&Help"].actions()


def test_screenshot_of_the_about_box(qtbot, shot_window, tmp_path):  # noqa: F811
    out = tmp_path / "about.png"
    assert run_director(qtbot, shot_window, ShotPlan(out=out, about=True)) == EXIT_OK
    image = QImage(str(out))
    assert 0 < image.width() < 1400 and 0 < image.height() < 900  # the box, not the window


# --- themes ----------------------------------------------------------------------------------------


def test_theme_flag_parses_and_defaults_to_system():
    assert app.parse_args([]).theme == "system"
    assert app.parse_args(["--theme", "dark", "--screenshot", "x.png", "--show-about"]).show_about
    with pytest.raises(SystemExit):
        app.parse_args(["--theme", "purple"])


def test_size_is_optional_and_screenshots_keep_their_default():
    options = app.parse_args([])
    assert options.size is None and (options.width, options.height) == (1400, 900)
    assert (app.parse_args(["--size", "1200x700"]).width, 700) == (1200, 700)


def test_dark_theme_is_fusion_with_a_dark_palette(dark_app):
    assert dark_app.style().name().lower() == "fusion"
    window_colour = dark_app.palette().color(QPalette.ColorRole.Window)
    text_colour = dark_app.palette().color(QPalette.ColorRole.WindowText)
    assert window_colour.lightness() < 80 and contrast_ratio(window_colour, text_colour) >= MIN_CONTRAST


def test_contrast_ratio_matches_wcag():
    assert contrast_ratio(QColor("black"), QColor("white")) == pytest.approx(21.0)
    assert contrast_ratio(QColor("#777777"), QColor("white")) == pytest.approx(4.48, abs=0.01)
    assert text_on(QColor("#202020")).lightness() > 200 and text_on(QColor("#ffd7d5")).lightness() < 50


def _assert_readable(background: QColor, text: QColor, what: str) -> None:
    ratio = contrast_ratio(background, text)
    assert ratio >= MIN_CONTRAST, f"{what}: {text.name()} on {background.name()} has contrast {ratio:.2f}"


def _css_pairs(css: str) -> list[tuple[str, str]]:
    """Every background in the CSS, each with the text colour set beside it (a background alone fails)."""
    assert css.count("background") == len(_CSS_PAIR.findall(css)), (
        f"a background without a text colour: {css}"
    )
    return _CSS_PAIR.findall(css)


@pytest.mark.parametrize("kind", ["error", "info"])
def test_banner_styles_are_readable_in_dark_theme(dark_app, qtbot, kind):
    [(background, text)] = _css_pairs(banner_style(kind))
    _assert_readable(QColor(background), QColor(text), f"{kind} banner")
    banner = ErrorBanner()
    qtbot.addWidget(banner)
    banner.show_error("boom") if kind == "error" else banner.show_info("note")
    banner.message.ensurePolished()
    label_text = banner.message.palette().color(QPalette.ColorRole.WindowText)  # what the label draws with
    _assert_readable(QColor(background), label_text, f"{kind} banner label")


def test_diff_and_legend_styles_are_readable_in_dark_theme(dark_app):
    css = " ".join(style for style in DIFF_STYLES.values() if style) + " " + legend_html()
    pairs = _css_pairs(css)
    assert len(pairs) >= 6  # two diff styles and four legend swatches
    for background, text in pairs:
        _assert_readable(QColor(background), QColor(text), "diff/legend")


def test_every_heat_shade_in_the_kept_view_sets_a_readable_text_colour(dark_app, qtbot):
    text = numbered_text(3000)
    document = Document(Path("/docs/report.pdf"), "pdf", text, three_pages(text), [])
    prompt, span = build_prompt(text, "What is this?")
    view = KeptTokenView()
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.show()
    view.set_selection(document, make_selection(prompt, span, RunSettings(keep=0.25, chunk_size=8)))
    checked = 0
    block = view.text.document().begin()
    while block.isValid():
        for fmt_range in block.layout().formats():
            fmt = fmt_range.format
            if fmt.background().style() != Qt.BrushStyle.NoBrush:
                assert fmt.foreground().style() != Qt.BrushStyle.NoBrush, "a shade without a text colour"
                _assert_readable(fmt.background().color(), fmt.foreground().color(), "kept shade")
                checked += 1
        block = block.next()
    assert checked > 0
    for shade in (0.0, 0.5, 1.0):
        for colour in (heat_colors.kept_color(shade), heat_colors.dropped_color(shade)):
            _assert_readable(colour, text_on(colour), "heat scale")
    _assert_readable(heat_colors.PROTECTED, text_on(heat_colors.PROTECTED), "protected")


@pytest.mark.parametrize("colour", ["#1b5e20", "#8a5300", "#b91c1c"])  # runs, bypassed/warnings, errors
def test_coloured_status_text_stays_readable_in_dark_theme(dark_app, qtbot, colour):
    label = QLabel()
    qtbot.addWidget(label)
    shown = QColor(re.search(r"color: (#[0-9a-f]{6})", text_css(label, colour)).group(1))
    _assert_readable(dark_app.palette().color(QPalette.ColorRole.Window), shown, f"{colour} text")
    caption = dark_app.palette().color(QPalette.ColorRole.Mid)  # the TTFT caption's colour
    _assert_readable(dark_app.palette().color(QPalette.ColorRole.Window), caption, "caption")


def test_coloured_text_that_already_reads_is_kept(qtbot):
    label = QLabel()
    qtbot.addWidget(label)
    label.setPalette(QPalette(QColor("#f0f0f0")))
    assert text_css(label, "#b91c1c") == "color: #b91c1c;"


def test_screenshot_can_also_save_the_answer_panes(qtbot, shot_window, long_pdf, tmp_path):  # noqa: F811
    out, answers = tmp_path / "window.png", tmp_path / "answers.png"
    plan = ShotPlan(out=out, document=str(long_pdf), question="Summarize this document", answers_out=answers)
    assert run_director(qtbot, shot_window, plan) == EXIT_OK
    qtbot.waitUntil(lambda: not shot_window.comparison.agreement_pending, timeout=3000)
    window_image, panes_image = QImage(str(out)), QImage(str(answers))
    assert window_image.width() == 1400 and 0 < panes_image.height() < window_image.height()
    options = app.parse_args(["--screenshot", "a.png", "--screenshot-answers", "b.png"])
    assert options.screenshot_answers == Path("b.png")
