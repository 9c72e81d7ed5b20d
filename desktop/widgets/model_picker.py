"""Models ▸ Choose Models…: pick a target among the GGUFs already on this machine.

The list comes from `discover_models` (LM Studio, Ollama, the Hugging Face cache, the app's own
cache), read on a worker thread. Picking a target plans its pair on a worker too, since comparing
vocabularies reads each candidate's token list: the suggested draft and why, what the pair needs
in memory against what is free, and the calibration's rough prediction. OK keeps the target and
the suggested draft in the model settings; the window then reloads the models.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QThreadPool
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.sessions.worker import Worker
from engine.api import DiscoveredModel, ModelSettings, PairPlan, format_bytes, plan_pair, usable_models

COLUMNS = ("Name", "Architecture", "Size", "Quantization", "Context", "File", "Found in")
SEARCHING = "Looking for models on this machine…"
PLANNING = "Checking which draft suits it…"


def model_row(model: DiscoveredModel) -> tuple[str, ...]:
    facts = model.facts
    context = f"{facts.context_length:,}" if facts.context_length else "?"
    return (
        model.name,
        facts.architecture or "?",
        facts.size_label,
        facts.quantization or "?",
        context,
        format_bytes(model.size_bytes),
        model.source,
    )


def plan_text(plan: PairPlan) -> str:
    lines = [
        f"Draft: {plan.draft.name} — {plan.draft.reason}.",
        f"Selection by {'token ids' if plan.draft.selection == 'tokens' else 'character spans'} "
        f"(vocabularies {plan.draft.verdict}).",
        f"Memory: the pair needs about {format_bytes(plan.needed_bytes)} with a full context; "
        f"{format_bytes(plan.free_bytes)} is free" + ("." if plan.fits else " — not enough."),
    ]
    if plan.prediction:
        p = plan.prediction
        lines.append(
            f"Predicted at {p['tokens']:,} tokens, keep {p['keep']}: full prefill {p['baseline_ttft_s']:.0f} s, "
            f"SpecPrefill {p['spec_ttft_s']:.0f} s ({p['speedup']:.1f}×), scaled from this machine's "
            "calibration by parameter count: a rough guide."
        )
    else:
        lines.append("No prediction: Models ▸ Calibrate This Machine… times this machine first.")
    return "\n".join(lines)


class ModelPicker(QDialog):
    """The discovered models in a table; the plan for the selected one under it."""

    def __init__(
        self,
        settings: ModelSettings,
        parent: QWidget | None = None,
        pool: QThreadPool | None = None,
        discover=None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Choose Models")
        self._settings = settings
        self._pool = pool or QThreadPool.globalInstance()
        self._models: list[DiscoveredModel] = []
        self._all: list[DiscoveredModel] = []
        self._plan: PairPlan | None = None
        self._plan_job: Worker | None = None
        self.table = self._make_table()
        self.status = QLabel(SEARCHING)
        self.status.setWordWrap(True)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self._ok().setEnabled(False)
        layout = QVBoxLayout(self)
        for widget in (self.table, self.status, self.buttons):
            layout.addWidget(widget)
        self.resize(900, 420)
        self._start_discovery(discover)

    def model_settings(self) -> ModelSettings:
        """The settings with the chosen target and its suggested draft (None: the bundled one)."""
        if self._plan is None:
            return self._settings
        return replace(
            self._settings, target_path=self._plan.target.resolved_path, draft_path=self._plan.draft.path
        )

    def _ok(self):
        return self.buttons.button(QDialogButtonBox.StandardButton.Ok)

    def _make_table(self) -> QTableWidget:
        table = QTableWidget(0, len(COLUMNS))
        table.setHorizontalHeaderLabels(COLUMNS)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.itemSelectionChanged.connect(self._on_selection)
        return table

    def _start_discovery(self, discover) -> None:
        if discover is None:
            from engine.api import discover_models as discover
        worker = Worker(lambda ctx: discover().models, name="model discovery")
        worker.finished.connect(self._show_models)
        worker.failed.connect(lambda error: self.status.setText(f"Could not look for models: {error}"))
        worker.start(self._pool)

    def _show_models(self, models: list[DiscoveredModel]) -> None:
        self._all = list(models)
        self._models = usable_models(models)
        self.table.setRowCount(len(self._models))
        for row, model in enumerate(self._models):
            for column, text in enumerate(model_row(model)):
                self.table.setItem(row, column, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        unreadable = len(models) - len(self._models)
        found = f"{len(self._models)} model(s) found" + (f", {unreadable} unreadable" if unreadable else "")
        self.status.setText(
            f"{found}. Select the target."
            if self._models
            else "No GGUF models found (LM Studio, Ollama, the Hugging Face cache). "
            "`specprefill models --discover` lists where it looked."
        )

    def _on_selection(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        self._plan = None
        self._ok().setEnabled(False)
        if not rows:
            return
        target = self._models[rows[0].row()]
        self.status.setText(PLANNING)
        worker = Worker(lambda ctx: plan_pair(target, self._all), name="pairing a draft")
        worker.finished.connect(lambda plan: self._show_plan(worker, plan))
        worker.failed.connect(lambda error: self._show_failure(worker, error))
        self._plan_job = worker.start(self._pool)

    def _show_plan(self, worker: Worker, plan: PairPlan) -> None:
        if worker is not self._plan_job:  # another row was selected since
            return
        self._plan = plan
        self.status.setText(plan_text(plan))
        self._ok().setEnabled(True)

    def _show_failure(self, worker: Worker, error: Exception) -> None:
        if worker is self._plan_job:
            self.status.setText(f"Could not pair a draft with it: {error}")
