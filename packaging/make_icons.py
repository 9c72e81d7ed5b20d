"""Render the app icon's PNG sizes from its SVG (run again after editing the SVG, and commit the PNGs).

    .venv/bin/python packaging/make_icons.py

The icons follow the freedesktop `hicolor` theme layout, so a packager can copy
`resources/icons/hicolor` into `/usr/share/icons` (or `~/.local/share/icons`) as it is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

HICOLOR = Path(__file__).resolve().parents[1] / "resources" / "icons" / "hicolor"
SVG = HICOLOR / "scalable" / "apps" / "specprefill.svg"
SIZES = (16, 32, 48, 64, 128, 256)


def png_path(size: int) -> Path:
    return HICOLOR / f"{size}x{size}" / "apps" / "specprefill.png"


def render(renderer: QSvgRenderer, size: int) -> QImage:
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    return image


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    _app = QGuiApplication(sys.argv[:1])  # painting needs one alive
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        print(f"cannot read {SVG}", file=sys.stderr)
        return 1
    for size in SIZES:
        out = png_path(size)
        out.parent.mkdir(parents=True, exist_ok=True)
        if not render(renderer, size).save(str(out), "PNG"):
            print(f"cannot write {out}", file=sys.stderr)
            return 1
        print(out.relative_to(HICOLOR.parents[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
