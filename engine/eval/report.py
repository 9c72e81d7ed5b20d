"""A/B reports as files: a self-contained HTML page (plots inlined as PNG, engine.eval.plots) and a CSV.

Both read an AbReport (engine.eval.results), so a report saved as JSON can be rendered again
later (`AbReport.from_json`). No external resources: the page opens offline.
"""

from __future__ import annotations

import csv
import io
import re
from html import escape

from engine.core.atomic import write_text_atomic
from engine.core.formatting import MISSING, format_count, format_percent, format_ratio, format_seconds
from engine.eval.labels import CACHED, FIT_FIELDS, cached_note, fit_note, run_label
from engine.eval.plots import quality_plot_png, ttft_plot_png
from engine.eval.results import (
    AbReport,
    CaseRecord,
    GroupSummary,
    RunRecord,
    RunSummary,
    Summary,
    accuracy_text,
)

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2937;
       max-width: 1200px; margin: 2rem auto; padding: 0 1rem; background: #fff; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 2px solid #e5e7eb; }
h3 { margin: 0 0 .3rem; font-size: 1.05rem; }
.muted { color: #6b7280; }
.plots { display: flex; flex-wrap: wrap; gap: 1rem; }
.plots figure { margin: 0; flex: 1 1 420px; } .plots img { width: 100%; border: 1px solid #e5e7eb; }
table { border-collapse: collapse; width: 100%; margin: .6rem 0; }
th, td { border: 1px solid #e5e7eb; padding: .35rem .55rem; text-align: left; vertical-align: top; }
th { background: #f3f4f6; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.case { border: 1px solid #e5e7eb; border-radius: 6px; padding: .8rem 1rem; margin: 1rem 0; }
.case table { table-layout: fixed; }
.answer { white-space: pre-wrap; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; }
.ok { color: #15803d; font-weight: 600; } .bad { color: #b91c1c; font-weight: 600; }
.tag { display: inline-block; background: #eef2ff; color: #3730a3; border-radius: 4px; padding: 0 .4rem;
       font-size: .85rem; }
"""


# -- files ---------------------------------------------------------------------------
def write_html(report: AbReport, path) -> None:
    write_text_atomic(path, render_html(report))


def write_csv(report: AbReport, path) -> None:
    """One row per case and run (baseline, then each keep), written atomically."""
    write_text_atomic(path, render_csv(report))


CSV_COLUMNS = (
    "case_id",
    "kind",
    "run",
    "keep",
    "answer",
    "correct",
    "agreement",
    "ttft_s",
    "tokenize_s",
    "draft_s",
    "select_s",
    "target_prefill_s",
    "prompt_tokens",
    "prefill_tokens",
    "kept_fraction",
    "positions",
    "bypassed",
    "bypass_reason",
    "generated_tokens",
    "stop_reason",
    "error",
)
# Only for suites run with --reuse-cache, so a cold suite's CSV keeps the columns it always had.
SESSION_CSV_COLUMNS = ("served_by", "ttft_kind")  # ttft_kind: "cold" or "cached"
# Only for suites where some document was longer than the window: how each run fit it, and its label.
FIT_CSV_COLUMNS = (*FIT_FIELDS, "fit_note")
# What makes a spreadsheet run a cell as a formula (OWASP), once it skips leading spaces and double quotes:
# at the start of a cell, and after a comma or semicolon, where a spreadsheet reading the file with that
# separator (a semicolon in many locales) starts a new cell in the middle of the text.
FORMULA_CHARS = "=+-@\t\r"
_FORMULA_CHAR = f"[{re.escape(FORMULA_CHARS)}]"
FORMULA_AT_START = re.compile(rf'^[\s"]*?{_FORMULA_CHAR}')
FORMULA_AFTER_SEPARATOR = re.compile(rf'[,;][\s"]*?(?={_FORMULA_CHAR})')


def render_csv(report: AbReport) -> str:
    """The runs that finished; a failed case adds one row with its error."""
    columns = csv_columns(report)
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=columns, restval="", extrasaction="ignore")
    writer.writeheader()
    for case in report.cases:
        for row in _csv_rows(case):
            writer.writerow({name: csv_cell(row.get(name)) for name in columns})
    return out.getvalue()


def csv_columns(report: AbReport) -> tuple[str, ...]:
    """The columns every CSV has, then those that say something for this report (cached runs, over-long documents)."""
    columns = CSV_COLUMNS
    if report.environment.reuse_cache:
        columns += SESSION_CSV_COLUMNS
    if report.has_unfit_runs:
        columns += FIT_CSV_COLUMNS
    return columns


def _csv_rows(case: CaseRecord) -> list[dict]:
    rows = [
        {
            **run.to_json(),
            "case_id": case.id,
            "kind": case.kind,
            "ttft_kind": CACHED if run.cached else "cold",
            "fit_note": run.fit_note,
            "run": "baseline" if keep is None else "spec",
            "keep": keep or "",
        }
        for keep, run in case.runs()
    ]
    if case.failed:
        rows.append({"case_id": case.id, "kind": case.kind, "error": case.error})
    return rows


def csv_cell(value) -> str:
    """A value as a CSV cell. Text is model output or user input: a formula in it is quoted, never run."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str):
        return str(value)  # a number such as -0.5 stays a number
    return quote_formulas(value)


def quote_formulas(text: str) -> str:
    """`text` with a ' before each formula a spreadsheet could start in it: after each separator that
    leads to one, and before the whole text when it starts with one. A spreadsheet shows the text; a
    ' at a cell's start does not show."""
    text = FORMULA_AFTER_SEPARATOR.sub(lambda m: m.group() + "'", text)
    return "'" + text if FORMULA_AT_START.match(text) else text


# -- HTML ------------------------------------------------------------------------------
def render_html(report: AbReport) -> str:
    summary, env = report.summary, report.environment
    cases = format_count(summary.overall.n_cases, "case")
    body = "\n".join(
        [
            "<h1>SpecPrefill A/B report</h1>",
            (
                f'<p class="muted">{_text(cases)} · keep {_text(", ".join(summary.keeps))}'
                f"{_errors_text(summary.overall)} · {_text(env.date)}</p>"
            ),
            "<h2>Plots</h2>",
            _plots(summary),
            "<h2>Summary</h2>",
            _summary_table(summary.overall, env.reuse_cache),
            _cached_explained(env.reuse_cache),
            _fit_explained(report.fit_tallies()),
            "<h2>By kind</h2>",
            _by_kind(summary.by_kind, env.reuse_cache),
            "<h2>Cases</h2>",
            *(_case_section(case) for case in report.cases),
            "<h2>Environment</h2>",
            _environment_table(env.to_json()),
        ]
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>SpecPrefill A/B report</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _text(value) -> str:
    """Any value as page text, numbers too: a report read back from JSON may hold markup where a number belongs."""
    return escape(str(value))


def _cached_explained(with_cached: bool) -> str:
    return f'<p class="muted">{_text(CACHED_EXPLAINED)}</p>' if with_cached else ""


def _fit_explained(tallies: dict[str, str]) -> str:
    """Which runs' documents were longer than the target's window, and how much of them they saw."""
    if not tallies:
        return ""
    items = "".join(f"<li><b>{_text(label)}</b>: {_text(tally)}</li>" for label, tally in tallies.items())
    return f'<p class="muted">{_text(FIT_EXPLAINED)}</p><ul class="muted">{items}</ul>'


def _errors_text(group: GroupSummary) -> str:
    if not group.n_errors:
        return ""
    return f' · <span class="bad">{_text(group.n_errors)} failed</span> (left out of the figures)'


def _plots(summary: Summary) -> str:
    figures = [
        ("Answer quality vs keep", quality_plot_png(summary)),
        ("TTFT vs keep", ttft_plot_png(summary)),
    ]
    items = "".join(
        f'<figure><img alt="{_text(title)}" src="data:image/png;base64,{_text(png)}"></figure>'
        for title, png in figures
    )
    return f'<div class="plots">{items}</div>'


SUMMARY_HEAD = (
    "run",
    "accuracy",
    "agreement",
    "mean TTFT",
    "speed-up",
    "kept",
    "draft",
    "target prefill",
    "bypassed",
)
CACHED_SUMMARY_HEAD = ("cached runs", "cached mean TTFT")  # suites run with --reuse-cache
FIT_EXPLAINED = (
    "Some documents were longer than the target's context window: the baseline (full prefill) saw "
    "them cut to fit (truncated), SpecPrefill fit them by its selection."
)
CACHED_EXPLAINED = (
    "Document caches were reused (--reuse-cache): mean TTFT, draft, target prefill and speed-up "
    "are over cold runs only; runs served from a cache are counted and averaged apart (cached)."
)


def _summary_table(group: GroupSummary, with_cached: bool) -> str:
    head = (*SUMMARY_HEAD, *CACHED_SUMMARY_HEAD) if with_cached else SUMMARY_HEAD
    head_row = "<tr>" + "".join(f"<th>{_text(title)}</th>" for title in head) + "</tr>"
    rows = [_summary_row(run_label(keep), s, with_cached) for keep, s in group.runs()]
    return f"<table>{head_row}{''.join(rows)}</table>"


def _summary_row(label: str, s: RunSummary, with_cached: bool) -> str:
    cells = [
        accuracy_text(s),
        format_percent(s.agreement),
        format_seconds(s.mean_ttft_s),
        format_ratio(s.speedup),
        format_percent(s.mean_kept_fraction),
        format_seconds(s.mean_draft_s),
        format_seconds(s.mean_target_prefill_s),
        _count(s.n_bypassed),
    ]
    if with_cached:
        cells += [_count(s.n_cached), format_seconds(s.cached_mean_ttft_s)]
    return f"<tr><th>{_text(label)}</th>{''.join(_num_cell(c) for c in cells)}</tr>"


def _count(n: int | None) -> str:
    return MISSING if n is None else str(n)


def _by_kind(by_kind: dict[str, GroupSummary], with_cached: bool) -> str:
    sections = [
        f'<h3>{_text(kind)} <span class="muted">({_text(format_count(group.n_cases, "case"))}'
        f"{_errors_text(group)})</span></h3>" + _summary_table(group, with_cached)
        for kind, group in sorted(by_kind.items())
    ]
    return "\n".join(sections)


def _case_section(case: CaseRecord) -> str:
    expected = (
        ", ".join(f"<code>{_text(a)}</code>" for a in case.answers)
        if case.answers
        else '<span class="muted">none (scored by agreement)</span>'
    )
    tokens = "" if case.prompt_tokens is None else f" · {_text(case.prompt_tokens)} prompt tokens"
    error = f'<p class="bad">Failed: {_text(case.error)}</p>' if case.failed else ""
    return (
        f'<section class="case"><h3>{_text(case.id)} <span class="tag">{_text(case.kind)}</span></h3>'
        f"<p><b>Q:</b> {_text(case.question)}<br><b>Expected:</b> {expected}<br>"
        f'<span class="muted">{_text(case.doc)}{tokens}</span></p>{error}{_runs_table(case)}</section>'
    )


def _runs_table(case: CaseRecord) -> str:
    runs = list(case.runs())
    if not runs:
        return ""
    labels = "".join(f"<th>{_text(run_label(keep))}</th>" for keep, _ in runs)
    rows = [
        _case_row("answer", [f'<div class="answer">{_text(run.result.answer)}</div>' for _, run in runs]),
        _case_row("correct", [_mark(run.correct) for _, run in runs]),
        _case_row(
            "agreement",
            [_text(MISSING if keep is None else format_percent(run.agreement)) for keep, run in runs],
        ),
        _case_row("TTFT", [_ttft_text(run) for _, run in runs]),
        _case_row("kept", [_kept_text(run) for _, run in runs]),
    ]
    return f"<table><tr><th></th>{labels}</tr>{''.join(rows)}</table>"


def _case_row(label: str, cells: list[str]) -> str:
    return f"<tr><th>{_text(label)}</th>{''.join(f'<td>{c}</td>' for c in cells)}</tr>"


def _ttft_text(run: RunRecord) -> str:
    """The TTFT, labelled when a cache served the run (it is not comparable with cold ones)."""
    return _text(format_seconds(run.result.ttft_s)) + _tag(cached_note(run.result))


def _kept_text(run: RunRecord) -> str:
    """What the target prefilled, labelled when the document did not fit (cut, or fit by selection)."""
    if run.result.bypassed:
        kept = "bypassed (full prefill)"
    else:
        kept = f"{_text(format_percent(run.result.kept_fraction))} · {_text(run.result.positions)}"
    return kept + _tag(fit_note(run.result))


def _tag(note: str) -> str:
    return f' <span class="tag">{_text(note)}</span>' if note else ""


def _mark(correct: bool | None) -> str:
    if correct is None:
        return f'<span class="muted">{_text(MISSING)}</span>'
    return '<span class="ok">✓ correct</span>' if correct else '<span class="bad">✗ incorrect</span>'


def _environment_table(env: dict) -> str:
    rows = "".join(
        f"<tr><th>{_text(key)}</th><td>{_text(_env_text(value))}</td></tr>" for key, value in flatten(env)
    )
    return f"<table>{rows}</table>"


def flatten(data: dict, prefix: str = "") -> list[tuple[str, object]]:
    """Nested dicts as ('a.b', value) pairs, for a two-column table."""
    pairs: list[tuple[str, object]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        pairs += flatten(value, f"{name}.") if isinstance(value, dict) else [(name, value)]
    return pairs


def _env_text(value) -> str:
    return MISSING if value is None else str(value)


def _num_cell(text: str) -> str:
    return f'<td class="num">{_text(text)}</td>'
