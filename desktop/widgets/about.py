"""Help ▸ About: the app's version, the versions it runs on, the loaded models, the licences."""

from __future__ import annotations

import html
import platform
from importlib import metadata
from typing import Any

import PySide6
from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QMessageBox, QWidget

from engine.api import APP_NAME, CREDITS, app_version

NOT_INSTALLED = "not installed"
NOT_LOADED = "not loaded"
# Read from the installed packages' metadata: importing torch here would cost seconds at start.
RUNTIME_PACKAGES = (("torch", "torch"), ("llama-cpp-python", "llama-cpp-python"))
LICENCES = tuple(
    (credit.name, credit.licence) for credit in CREDITS
)  # THIRD_PARTY.md says where each is from

Fact = tuple[str, str]


def package_version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED


def version_facts() -> list[Fact]:
    facts = [
        ("Python", platform.python_version()),
        ("PySide6 / Qt", f"{PySide6.__version__} / {qVersion()}"),
    ]
    return facts + [(label, package_version(name)) for label, name in RUNTIME_PACKAGES]


def model_facts(info: Any | None) -> list[Fact]:
    """The loaded models' names, from the engine's EngineInfo (None: nothing loaded)."""
    if info is None:
        return [("Target model", NOT_LOADED), ("Draft model", NOT_LOADED)]
    return [
        ("Target model", str(info.target_name)),
        ("Draft model", str(info.draft_name)),
        ("Draft precision", draft_precision_text(info)),
        ("llama.cpp CPU path", str(getattr(info, "cpu_path", "") or "not recorded")),
    ]


def draft_precision_text(info: Any) -> str:
    """ "int8 (measured on this CPU: …)": the draft's number format and why."""
    precision = getattr(info, "draft_precision", "")
    reason = getattr(info, "draft_precision_reason", "")
    if not precision:
        return "not recorded"
    return f"{precision} ({reason})" if reason else str(precision)


def about_html(info: Any | None) -> str:
    def rows(facts: list[Fact]) -> str:
        return "".join(
            f"<tr><td>{html.escape(k)}:&nbsp;</td><td>{html.escape(v)}</td></tr>" for k, v in facts
        )

    return (
        f"<h3>{html.escape(APP_NAME)} {html.escape(app_version())}</h3>"
        "<p>Ask a local LLM about a long document; SpecPrefill gets the first token sooner.</p>"
        f"<p><b>Runs on</b></p><table>{rows(version_facts())}</table>"
        f"<p><b>Models</b></p><table>{rows(model_facts(info))}</table>"
        f"<p><b>Licences</b></p><table>{rows(list(LICENCES))}</table>"
    )


def about_box(parent: QWidget, info: Any | None) -> QMessageBox:
    """A non-blocking About box (open, not exec: the app keeps running behind it)."""
    box = QMessageBox(
        QMessageBox.Icon.NoIcon,
        f"About {APP_NAME}",
        about_html(info),
        QMessageBox.StandardButton.Close,
        parent,
    )
    box.setObjectName("aboutBox")
    box.setTextFormat(Qt.TextFormat.RichText)
    return box
