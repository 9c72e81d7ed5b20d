"""Hostile text in an A/B report stays data: no spreadsheet runs a CSV cell as a formula, and no page
rendered from a saved report (AbReport.from_json, then render_html) runs a script."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from engine.core.errors import SpecPrefillError
from engine.eval import report as report_module
from engine.eval.report import csv_cell, render_csv, render_html
from engine.eval.results import AbReport

REPORTS = Path(__file__).resolve().parents[2] / "research"
# A saved suite run with --reuse-cache whose long documents were cut or selected: every CSV column appears.
FULL_REPORT = "codebase-long/ab-codebase-long.json"


def read(name: str) -> dict:
    return json.loads((REPORTS / name).read_text(encoding="utf-8"))


# -- CSV injection -----------------------------------------------------------------------------------
FORMULA_PAYLOADS = (
    "=1+1",
    ';=HYPERLINK("x")',
    "a,=cmd|' /C calc'!A0",
    "\t=1",
    "\r=1",
    "+1",
    "@SUM(1)",
    "-2+3",
    'ok, "=1+1"',
    "a; \t@x",
    " =1",
)
NEGATIVE_NUMBER = -0.5
# A formula character at the start of a cell, after optional spaces and double quotes (spreadsheets skip them).
FORMULA_START = re.compile(r'[\s"]*?[=+\-@\t\r]')


def replace_strings(data, payload: str):
    """`data` with every string in it, dict keys left as they are, replaced by `payload`."""
    if isinstance(data, dict):
        return {key: replace_strings(value, payload) for key, value in data.items()}
    if isinstance(data, list):
        return [replace_strings(value, payload) for value in data]
    return payload if isinstance(data, str) else data


def hostile_report(payload: str) -> AbReport:
    """The full saved report with `payload` in every text a CSV row carries: ids, kinds, keeps, answers,
    positions, reasons, errors; one failed case, one negative timing."""
    data = read(FULL_REPORT)
    cases = [replace_strings(case, payload) for case in data["cases"]]
    for case in cases:
        (run,) = case["spec"].values()  # the report has one keep: it becomes the payload too
        case["spec"] = {payload: run}
    cases[0]["baseline"]["fit"] = "truncated"  # one document that did not fit keeps the fit columns
    cases[0]["baseline"]["target_prefill_s"] = NEGATIVE_NUMBER
    cases[1].update(status="error", error=payload)
    return AbReport.from_json({**data, "cases": cases})


def cell_starts(cell: str) -> list[str]:
    """Where a spreadsheet may start a cell in this text: its start, and after each comma or semicolon
    (a spreadsheet reading the file with that separator splits the text there)."""
    return [cell, *re.split(r"[,;]", cell)[1:]]


@pytest.mark.parametrize("payload", FORMULA_PAYLOADS)
def test_no_csv_cell_can_start_a_formula_in_any_column(payload):
    rows = list(csv.reader(io.StringIO(render_csv(hostile_report(payload)), newline="")))
    header, rows = rows[0], rows[1:]
    every_column = (
        report_module.CSV_COLUMNS + report_module.SESSION_CSV_COLUMNS + report_module.FIT_CSV_COLUMNS
    )
    assert tuple(header) == every_column
    answer = rows[0][header.index("answer")]
    assert answer.replace("'", "") == payload.replace("'", "")  # the text itself, but for the quotes put in
    for row in rows:
        for name, cell in zip(header, row):
            if name == "target_prefill_s" and cell == str(NEGATIVE_NUMBER):
                continue  # a number stays a number, negative or not
            for start in cell_starts(cell):
                assert not FORMULA_START.match(start), (name, cell)


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("\t=1", "'\t=1"),
        (" =1", "' =1"),
        ("a,=cmd|' /C calc'!A0", "a,'=cmd|' /C calc'!A0"),
        (';=HYPERLINK("x")', ';\'=HYPERLINK("x")'),
        ('ok, "=1+1"', 'ok, "\'=1+1"'),
        ("-0.5", "'-0.5"),  # text that looks like a number is still text from a model
        ("a, b; c", "a, b; c"),  # separators alone are harmless
        ("1-2, e-mail", "1-2, e-mail"),
        ("x;'=1", "x;'=1"),  # already quoted: left as it is
    ],
)
def test_csv_cell_quotes_every_formula_a_spreadsheet_could_start(text, cell):
    assert csv_cell(text) == cell


def test_csv_cell_keeps_numbers_and_flags_as_they_are():
    assert [csv_cell(v) for v in (NEGATIVE_NUMBER, -3, 0.25, True, False, None)] == [
        "-0.5",
        "-3",
        "0.25",
        "true",
        "false",
        "",
    ]


def test_a_negative_number_stays_a_number_in_the_csv():
    rows = list(csv.DictReader(io.StringIO(render_csv(hostile_report("=1")), newline="")))
    assert rows[0]["target_prefill_s"] == "-0.5" and rows[0]["answer"] == "'=1"


# -- HTML from a saved report ------------------------------------------------------------------------
SCRIPT = "<script>x</script>"


def leaf_paths(data, path: tuple = ()) -> list[tuple]:
    """The key/index path of every value in a JSON document that is not a dict or a list."""
    if isinstance(data, dict):
        return [leaf for key, value in data.items() for leaf in leaf_paths(value, (*path, key))]
    if isinstance(data, list):
        return [leaf for i, value in enumerate(data) for leaf in leaf_paths(value, (*path, i))]
    return [path]


def container_of(data, path: tuple):
    for step in path[:-1]:
        data = data[step]
    return data


def report_with_failures() -> dict:
    """The full saved report, with one failed case and the summary counts that say so."""
    data = read(FULL_REPORT)
    data["cases"][1].update(status="error", error="the prompt has 40000 tokens")
    data["summary"]["n_errors"] = 1
    data["summary"]["by_kind"]["code"]["n_errors"] = 1
    return data


@pytest.fixture
def no_plots(monkeypatch):
    """The plots are PNGs, so no report text reaches the page through them; drawing them for every field
    would only make the test slow."""
    monkeypatch.setattr(report_module, "quality_plot_png", lambda summary: "")
    monkeypatch.setattr(report_module, "ttft_plot_png", lambda summary: "")


def test_the_page_has_no_script_of_its_own():
    assert "<script" not in render_html(AbReport.from_json(report_with_failures())).lower()


def test_a_script_in_any_field_of_a_saved_report_is_refused_or_escaped(no_plots):
    """Each value of the saved JSON in turn becomes a script: either from_json refuses the report, naming
    the field (a number or a flag where text would not belong), or the page shows the script as text."""
    data = report_with_failures()
    refused = []
    for path in leaf_paths(data):
        holder, key = container_of(data, path), path[-1]
        original, holder[key] = holder[key], SCRIPT
        try:
            report = AbReport.from_json(data)
        except SpecPrefillError as e:
            assert str(key) in str(e), path
            refused.append(path)
        else:
            assert "<script" not in render_html(report).lower(), path  # shown as text, or not shown
        finally:
            holder[key] = original
    for path in [
        ("cases", 0, "prompt_tokens"),
        ("summary", "n_errors"),
        ("summary", "by_kind", "code", "n_errors"),
        ("cases", 0, "baseline", "ttft_s"),
        ("summary", "spec", "0.2", "n_bypassed"),
        ("summary", "baseline", "n_cached"),
        ("environment", "n_ctx"),
    ]:
        assert path in refused


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        (("cases", 0, "prompt_tokens"), "case 'structlog-native-interpolate-helper': prompt_tokens"),
        (("summary", "n_errors"), "n_errors"),
        (("cases", 0, "spec", "0.2", "kept_fraction"), "kept_fraction"),
        (("environment", "threads"), "threads"),
    ],
)
def test_from_json_says_which_field_holds_text_where_a_number_belongs(path, needle):
    data = report_with_failures()
    container_of(data, path)[path[-1]] = SCRIPT
    with pytest.raises(SpecPrefillError, match=re.escape(needle)) as raised:
        AbReport.from_json(data)
    assert isinstance(raised.value, TypeError)  # a damaged journal line is reported as one, not a crash


def test_numbers_are_escaped_too_when_a_report_is_built_in_code():
    """Escaping does not rely on from_json: counts that hold text reach the page as text."""
    report = AbReport.from_json(report_with_failures())
    summary, overall = report.summary, report.summary.overall
    spec = {keep: replace(s, n_bypassed=SCRIPT, n_cached=SCRIPT) for keep, s in overall.spec.items()}
    overall = replace(
        overall, n_errors=SCRIPT, spec=spec, baseline=replace(overall.baseline, n_cached=SCRIPT)
    )
    by_kind = {kind: replace(group, n_errors=SCRIPT) for kind, group in summary.by_kind.items()}
    cases = (replace(report.cases[0], prompt_tokens=SCRIPT), *report.cases[1:])
    page = render_html(
        replace(report, cases=cases, summary=replace(summary, overall=overall, by_kind=by_kind))
    )
    assert "<script" not in page.lower()
    assert page.count("&lt;script&gt;x&lt;/script&gt;") >= 5


def saved_ab_reports() -> list[Path]:
    """The A/B reports among the saved JSON files (the others are bench, calibration and needle reports)."""
    reports = {path: json.loads(path.read_text(encoding="utf-8")) for path in sorted(REPORTS.rglob("*.json"))}
    return [
        path
        for path, data in reports.items()
        if isinstance(data, dict) and {"summary", "cases", "environment"} <= data.keys()
    ]


@pytest.mark.parametrize("path", saved_ab_reports(), ids=lambda path: str(path.relative_to(REPORTS)))
def test_every_saved_ab_report_still_reads(path):
    """from_json now checks numbers and flags: every report written so far passes."""
    data = json.loads(path.read_text(encoding="utf-8"))
    assert len(AbReport.from_json(data).cases) == len(data["cases"])
