"""Settings: the model settings and the run preferences, one row per field the schema labels.

Every row is generated from the field's Option (engine.api): its label, tooltip (the help
text), spin range, choices, and the text shown for None ("Auto (…)") or 0 ("Full attention").
So the dialog cannot offer a value the engine refuses, such as a look-ahead of 0.
Fields the schema puts in a group (Option.group: "Sampling") get a box of that title below the
rows. A few unlabelled fields get a section of their own below those (OWN_SECTIONS): the RPC
workers (ModelSettings.rpc) are a list with its own buttons, not one value in a row.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from desktop.model.preferences import RunPreferences, dialog_fields, schema_fields
from desktop.widgets.remote_workers import RemoteWorkersPanel
from engine.api import DEFAULT_MIN_TOKENS, ModelSettings, Option, RunSettings, option_of, value_type

SPIN_LIMIT = 2**31 - 1  # a QSpinBox holds a 32-bit int
FLOAT_DECIMALS = 2  # sizes in GB: hundredths are fine enough
# How far one arrow click moves a decimal spin box; 0.1 for the others.
FLOAT_STEPS = {"state_cache_gb": 1.0, "draft_cache_gb": 0.5, "top_p": 0.05, "min_p": 0.01}
# How far one arrow click moves a spin box: presentation only, not a setting's value.
SPIN_STEPS = {"n_ctx": 1024, "draft_window": 1024, "min_tokens": 256, "max_new_tokens": 64}
FOLDER_MODELS = {"draft_path"}  # a draft may also be a transformers model folder
# Where the token spin starts when "automatic" is unticked: the fixed value automatic falls back to.
UNTICKED_STARTS = {"min_tokens": DEFAULT_MIN_TOKENS}
SPIN_SUFFIXES = {"min_tokens": " tokens"}  # the unit a count's spin box shows, where it has one
# The attribute names the window and its tests use for some rows; the others use the field's name.
ATTRIBUTES = {
    "target_path": "target",
    "draft_path": "draft",
    "draft_quant": "draft_precision",
    "n_threads": "threads",
    "n_ctx": "context",
    "min_tokens": "threshold",
}
# Fields edited in a section of their own rather than a form row, with the section's widget and attribute name.
OWN_SECTIONS = {"rpc": (RemoteWorkersPanel, "remote_workers")}


def _largest(option: Option) -> int:
    """The top of a spin box for this option: its maximum, or as far as a QSpinBox goes."""
    return int(min(option.maximum if option.maximum is not None else SPIN_LIMIT, SPIN_LIMIT))


def _phrase(meaning: str) -> str:
    """A none_means text ("the physical cores") as it reads in brackets: "physical cores"."""
    return meaning.removeprefix("the ")


# --- one editor per kind of field: each is the row's widget, with field_value / set_field_value ------


class _PathField(QWidget):
    """A path line edit with Browse buttons; empty means the default model."""

    def __init__(self, option: Option, allow_folder: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText(option.help)
        self.edit.setToolTip(option.help)
        self.setToolTip(option.help)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        file_button = QPushButton("File…")
        file_button.clicked.connect(self._browse_file)
        layout.addWidget(file_button)
        if allow_folder:
            folder_button = QPushButton("Folder…")
            folder_button.clicked.connect(self._browse_folder)
            layout.addWidget(folder_button)

    @property
    def path(self) -> Path | None:
        text = self.edit.text().strip()
        return Path(text).expanduser() if text else None

    def set_path(self, path: Path | None) -> None:
        self.edit.setText(str(path) if path else "")

    def field_value(self) -> Path | None:
        return self.path

    def set_field_value(self, path: Path | None) -> None:
        self.set_path(path)

    def _browse_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose a model", self.edit.text(), "GGUF models (*.gguf);;All files (*)"
        )
        if path:
            self.edit.setText(path)

    def _browse_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Choose a transformers model folder", self.edit.text())
        if path:
            self.edit.setText(path)


class _ChoiceBox(QComboBox):
    def __init__(self, option: Option, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        for choice in option.choices:
            self.addItem(option.label_for(choice), choice)
        self.setToolTip(option.help)

    def field_value(self) -> str:
        return self.currentData()

    def set_field_value(self, value: str) -> None:
        self.setCurrentIndex(max(self.findData(value), 0))


class _FlagBox(QCheckBox):
    def __init__(self, option: Option, parent: QWidget | None = None) -> None:
        super().__init__(option.help, parent)
        self.setToolTip(option.help)

    def field_value(self) -> bool:
        return self.isChecked()

    def set_field_value(self, value: bool) -> None:
        self.setChecked(value)


class _CountSpin(QSpinBox):
    """A whole number in the option's range. Where None is allowed it sits one below the minimum,
    shown as "Auto (…)"; where 0 is special (zero_means), 0 shows its meaning."""

    def __init__(self, option: Option, step: int, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._none = int(option.minimum) - 1 if option.none_means else None
        low = self._none if self._none is not None else int(option.minimum)
        self.setRange(low, _largest(option))
        self.setSingleStep(step)
        self.setToolTip(option.help)
        special = f"Auto ({_phrase(option.none_means)})" if option.none_means else option.zero_means
        if special:
            self.setSpecialValueText(special)  # shown at the minimum value

    def stepBy(self, steps: int) -> None:
        # From "Auto" the first step up lands on the smallest allowed value, not on Auto + one step.
        if self._none is not None and self.value() == self._none and steps > 0:
            self.setValue(self._none + 1)
            steps -= 1
        super().stepBy(steps)

    def field_value(self) -> int | None:
        return None if self.value() == self._none else self.value()

    def set_field_value(self, value: int | None) -> None:
        self.setValue(self._none if value is None else value)


class _AmountSpin(QDoubleSpinBox):
    """A decimal amount (a size in GB) in the option's range; where 0 is special it shows its meaning."""

    def __init__(self, option: Option, step: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDecimals(FLOAT_DECIMALS)
        low = option.minimum if option.minimum is not None else 0.0
        if option.above_minimum:  # the minimum itself is refused: start one step of the display above it
            low += 10**-FLOAT_DECIMALS
        self.setRange(low, option.maximum if option.maximum is not None else float(SPIN_LIMIT))
        self.setSingleStep(step)
        self.setToolTip(option.help)
        if option.zero_means and low == 0:
            self.setSpecialValueText(f"0 ({option.zero_means})")  # shown at the minimum, 0

    def field_value(self) -> float:
        return float(self.value())

    def set_field_value(self, value: float) -> None:
        self.setValue(value)


class _AutomaticOrCount(QWidget):
    """A count where None (automatic) and 0 are both meaningful: a tick box beside a spin box."""

    def __init__(
        self, option: Option, step: int, unticked_start: int, suffix: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._unticked_start = unticked_start
        self.automatic = QCheckBox(f"automatic ({_phrase(option.none_means)})")
        self.tokens = QSpinBox()
        self.tokens.setRange(int(option.minimum), _largest(option))
        self.tokens.setSingleStep(step)
        self.tokens.setSuffix(suffix)
        for widget in (self, self.automatic, self.tokens):
            widget.setToolTip(option.help)
        self.automatic.toggled.connect(lambda on: self.tokens.setEnabled(not on))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.automatic)
        layout.addWidget(self.tokens, 1)

    @property
    def value(self) -> int | None:
        return None if self.automatic.isChecked() else self.tokens.value()

    def set_value(self, value: int | None) -> None:
        self.automatic.setChecked(value is None)
        self.tokens.setEnabled(value is not None)
        # Unticking "automatic" starts from the value automatic falls back to, not from 0.
        self.tokens.setValue(self._unticked_start if value is None else value)

    def field_value(self) -> int | None:
        return self.value

    def set_field_value(self, value: int | None) -> None:
        self.set_value(value)


def edited_fields(cls: type) -> list[str]:
    """The fields of `cls` the dialog edits: the labelled rows, then those with a section of their own."""
    return dialog_fields(cls) + [name for name in OWN_SECTIONS if name in schema_fields(cls)]


def editor_for(cls: type, name: str, option: Option) -> QWidget:
    """The widget that edits field `name` of `cls`, from its type and Option."""
    kind = value_type(cls, name)
    step = SPIN_STEPS.get(name, 1)
    if option.choices:
        return _ChoiceBox(option)
    if kind is bool:
        return _FlagBox(option)
    if kind is Path:
        return _PathField(option, allow_folder=name in FOLDER_MODELS)
    if kind is int and option.none_means and option.minimum == 0:  # no spare value below 0 to mean None
        return _AutomaticOrCount(option, step, UNTICKED_STARTS.get(name, 0), SPIN_SUFFIXES.get(name, ""))
    if kind is int:
        return _CountSpin(option, step)
    if kind is float:
        return _AmountSpin(option, FLOAT_STEPS.get(name, 0.1))
    raise TypeError(f"the Settings dialog has no editor for {cls.__name__}.{name} ({kind.__name__})")


class SettingsDialog(QDialog):
    def __init__(
        self, model_settings: ModelSettings, run_prefs: RunPreferences, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._base = model_settings  # fields the dialog does not edit (n_batch) are kept from here
        self._form = QFormLayout()
        self._group_forms: dict[str, QFormLayout] = {}  # by Option.group, in the schema's order
        self._row_forms: dict[str, QFormLayout] = {}  # the form each field's row is in
        self._editors: dict[str, QWidget] = {}
        for cls in (ModelSettings, RunSettings):
            self._add_rows(cls)
        sections = [self._add_section(name) for name in OWN_SECTIONS]
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.restore_button = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        self.restore_button.clicked.connect(self.restore_defaults)
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        layout = QVBoxLayout(self)
        layout.addLayout(self._form)
        self.groups: dict[str, QGroupBox] = {}
        for title, form in self._group_forms.items():
            self.groups[title] = QGroupBox(title)
            self.groups[title].setLayout(form)
            layout.addWidget(self.groups[title])
        for section in sections:
            layout.addWidget(section)
        layout.addWidget(buttons)
        self.resize(640, self.sizeHint().height())
        self.set_values(model_settings, run_prefs)

    def _add_rows(self, cls: type) -> None:
        for name in dialog_fields(cls):
            option = option_of(cls, name)
            editor = editor_for(cls, name, option)
            self._editors[name] = editor
            setattr(self, ATTRIBUTES.get(name, name), editor)
            form = self._group_forms.setdefault(option.group, QFormLayout()) if option.group else self._form
            self._row_forms[name] = form
            form.addRow(f"{option.label}:", editor)

    def _add_section(self, name: str) -> QWidget:
        section_class, attribute = OWN_SECTIONS[name]
        section = section_class()
        self._editors[name] = section
        setattr(self, attribute, section)
        return section

    def editor(self, name: str) -> QWidget:
        """The widget editing settings field `name`."""
        return self._editors[name]

    def label_of(self, name: str) -> str:
        return self._row_forms[name].labelForField(self._editors[name]).text()

    def set_values(self, model_settings: ModelSettings, run_prefs: RunPreferences) -> None:
        for source, cls in ((model_settings, ModelSettings), (run_prefs, RunSettings)):
            for name in edited_fields(cls):
                self._editors[name].set_field_value(getattr(source, name))

    def restore_defaults(self) -> None:
        self.set_values(ModelSettings(), RunPreferences())

    def model_settings(self) -> ModelSettings:
        values = self._values_of(edited_fields(ModelSettings))
        if values["rpc"] != self._base.rpc:
            # An explicit layer split names one weight per worker: it does not carry over to other workers,
            # and the engine refuses one that does not match. Other workers are split by their free memory.
            values["rpc_split"] = ""
        return replace(self._base, **values)

    def run_preferences(self) -> RunPreferences:
        return RunPreferences(**self._values_of(edited_fields(RunSettings)))

    def _values_of(self, names: list[str]) -> dict[str, Any]:
        return {name: self._editors[name].field_value() for name in names}
