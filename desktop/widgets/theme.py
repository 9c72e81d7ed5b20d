"""Light, dark or the system's look (`--theme`), and readable text on any highlight.

Every highlight in the app sets a background; `text_on` picks the text colour that goes
with it, so a light highlight keeps dark text even when the theme's text is light.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory, QWidget

THEME_LIGHT, THEME_DARK, THEME_SYSTEM = "light", "dark", "system"
THEMES = (THEME_LIGHT, THEME_DARK, THEME_SYSTEM)
MIN_CONTRAST = 4.5  # WCAG AA for normal text
DARK_TEXT, LIGHT_TEXT = QColor(20, 20, 20), QColor(250, 250, 250)

_Role = QPalette.ColorRole
_DARK = {
    _Role.Window: (45, 45, 48),
    _Role.WindowText: (230, 230, 230),
    _Role.Base: (30, 30, 32),
    _Role.AlternateBase: (50, 50, 54),
    _Role.ToolTipBase: (60, 60, 64),
    _Role.ToolTipText: (230, 230, 230),
    _Role.PlaceholderText: (150, 150, 150),
    _Role.Text: (230, 230, 230),
    _Role.Button: (55, 55, 60),
    _Role.ButtonText: (230, 230, 230),
    _Role.BrightText: (255, 90, 90),
    _Role.Link: (110, 170, 255),
    _Role.Highlight: (52, 120, 200),
    _Role.HighlightedText: (255, 255, 255),
    _Role.Mid: (155, 155, 160),  # captions use it as text: it must read on Window
    _Role.Dark: (25, 25, 27),
    _Role.Light: (80, 80, 85),
}
_DISABLED_DARK = {
    _Role.WindowText: (120, 120, 120),
    _Role.Text: (120, 120, 120),
    _Role.ButtonText: (120, 120, 120),
}


def relative_luminance(color: QColor) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(color.red()) + 0.7152 * linear(color.green()) + 0.0722 * linear(color.blue())


def contrast_ratio(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio, from 1 (none) to 21 (black on white)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_on(background: QColor) -> QColor:
    """Dark or light text, whichever reads better on this background."""
    return max((DARK_TEXT, LIGHT_TEXT), key=lambda text: contrast_ratio(text, background))


def readable_on(color: QColor, background: QColor) -> QColor:
    """`color`, or the nearest mix of it toward black or white that reads on `background`."""
    target = text_on(background)
    for step in range(11):
        t = step / 10
        mixed = QColor(*(round(a + (b - a) * t) for a, b in zip(color.getRgb()[:3], target.getRgb()[:3])))
        if contrast_ratio(mixed, background) >= MIN_CONTRAST:
            return mixed
    return target


def text_css(widget: QWidget, color: str) -> str:
    """CSS for coloured text on a widget's own background, kept readable in any theme."""
    background = widget.palette().color(widget.backgroundRole())
    return f"color: {readable_on(QColor(color), background).name()};"


def highlight_css(background: QColor | str, extra: str = "") -> str:
    """CSS for a highlight: its background and the text colour that reads on it."""
    color = QColor(background)
    return f"background:{color.name()}; color:{text_on(color).name()};{extra}"


def dark_palette() -> QPalette:
    palette = QPalette()
    for role, rgb in _DARK.items():
        palette.setColor(role, QColor(*rgb))
    for role, rgb in _DISABLED_DARK.items():
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(*rgb))
    return palette


def light_palette() -> QPalette:
    return QStyleFactory.create("Fusion").standardPalette()


def apply_theme(app: QApplication, theme: str) -> None:
    """Fusion with a dark or light palette; "system" leaves the platform's look alone."""
    if theme == THEME_SYSTEM:
        return
    app.setStyle("Fusion")
    app.setPalette(dark_palette() if theme == THEME_DARK else light_palette())
