"""The A/B report's plots as base64 PNG: answer quality and mean TTFT against keep.

matplotlib loads on the first plot (the CLI starts fast), through its object API: no GUI backend,
no global figure state, safe on a worker thread.
"""

from __future__ import annotations

import base64
import io
from operator import attrgetter

from engine.core.settings import AUTO_KEEP
from engine.eval.results import RunSummary, Summary

BASELINE_COLOR = "#6b7280"
SPEC_COLOR = "#2563eb"
AGREEMENT_COLOR = "#16a34a"


def quality_plot_png(summary: Summary) -> str:
    """Accuracy (and agreement with the baseline) against keep; baseline accuracy as a line."""
    keeps, overall = list(summary.keeps), summary.overall
    spec = overall.spec
    fig, ax = _new_axes("Answer quality vs keep", "share")
    if overall.baseline.accuracy is not None:
        ax.axhline(overall.baseline.accuracy, color=BASELINE_COLOR, linestyle="--", label="baseline accuracy")
    _plot_series(ax, spec, keeps, attrgetter("accuracy"), SPEC_COLOR, "-", "SpecPrefill accuracy")
    _plot_series(
        ax, spec, keeps, attrgetter("agreement"), AGREEMENT_COLOR, ":", "agreement with baseline (ROUGE-L)"
    )
    ax.set_ylim(0, 1.05)
    return _finish(fig, ax, keeps)


def ttft_plot_png(summary: Summary) -> str:
    """Mean time to first token against keep; the baseline's mean as a line."""
    keeps, overall = list(summary.keeps), summary.overall
    spec = overall.spec
    fig, ax = _new_axes("Mean TTFT vs keep", "seconds")
    if overall.baseline.mean_ttft_s is not None:
        ax.axhline(overall.baseline.mean_ttft_s, color=BASELINE_COLOR, linestyle="--", label="baseline")
    _plot_series(ax, spec, keeps, attrgetter("mean_ttft_s"), SPEC_COLOR, "-", "SpecPrefill")
    _plot_series(ax, spec, keeps, attrgetter("mean_draft_s"), SPEC_COLOR, ":", "draft scoring (part of TTFT)")
    # --reuse-cache: a case's later keeps reuse its draft pass, so they have cached TTFTs only.
    _plot_series(
        ax, spec, keeps, attrgetter("cached_mean_ttft_s"), SPEC_COLOR, "--", "SpecPrefill, draft cached"
    )
    ax.set_ylim(bottom=0)
    return _finish(fig, ax, keeps)


def _new_axes(title: str, ylabel: str):
    # Imported on first plot so the CLI starts fast. The object API, not pyplot: no GUI backend,
    # no global figure state, safe on a worker thread.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.6, 3.4), dpi=110, layout="constrained")
    ax = fig.subplots()
    ax.set_title(title)
    ax.set_xlabel("keep (fraction of chunks prefilled)")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _plot_series(
    ax, spec: dict[str, RunSummary], keeps: list[str], value_of, color: str, style: str, label: str
) -> None:
    """The fixed keeps as a line; keep auto as a star at the share it kept on average."""
    points = [(float(k), value_of(spec[k])) for k in _fixed_keeps(keeps)]
    points = [(x, y) for x, y in points if y is not None]
    if points:
        xs, ys = zip(*sorted(points))
        ax.plot(xs, ys, marker="o", color=color, linestyle=style, label=label)
    if AUTO_KEEP in keeps:
        x, y = spec[AUTO_KEEP].mean_kept_fraction, value_of(spec[AUTO_KEEP])
        if x is not None and y is not None:
            ax.plot(
                [x],
                [y],
                marker="*",
                markersize=12,
                color=color,
                linestyle="none",
                label=None if points else label,
            )
            ax.annotate(
                AUTO_KEEP, (x, y), textcoords="offset points", xytext=(6, 4), fontsize="small", color=color
            )


def _fixed_keeps(keeps: list[str]) -> list[str]:
    return [k for k in keeps if k != AUTO_KEEP]


def _finish(fig, ax, keeps: list[str]) -> str:
    fixed = _fixed_keeps(keeps)
    ax.set_xticks([float(k) for k in fixed], labels=fixed)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode("ascii")
