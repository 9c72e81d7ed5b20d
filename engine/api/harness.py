"""The evaluation harness, for the command line: A/B suites beyond what the app runs (journals,
resumes, the HTML report), benchmarks, needle retrieval and calibration with all its options.

The CLI imports the engine through engine.api only (an import-linter contract checks it): what the
app uses too is in engine.api itself; what only the CLI's verbs need is here and in
engine.api.maintenance. Importing this module imports the evaluation modules, not the model
runtimes (torch, llama.cpp load when a model is loaded).
"""

from __future__ import annotations

from engine.eval import needles  # the needle-in-a-haystack harness, as one namespace
from engine.eval.ab import AbEvent, keep_setting
from engine.eval.ab_environment import settings_record
from engine.eval.bench import BenchRow, bench_report, bench_settings, plot_ttft, run_bench
from engine.eval.calibrate import DEFAULT_LENGTHS, Measurement, calibrate_machine
from engine.eval.journal import (
    JournalHeader,
    append_case,
    claim_journal,
    default_journal_path,
    read_journal,
    start_journal,
)
from engine.eval.labels import fit_label, seen_text
from engine.eval.read_ahead_bench import ReadAheadBenchRow, run_read_ahead_bench
from engine.eval.report import write_html
from engine.eval.results import accuracy_text
from engine.eval.session_bench import SessionBenchRow, prefix_context_rss_bytes, run_session_bench

__all__ = [
    "needles",
    # A/B suites (the rest is in engine.api)
    "AbEvent",
    "keep_setting",
    "settings_record",
    "JournalHeader",
    "append_case",
    "claim_journal",
    "default_journal_path",
    "read_journal",
    "start_journal",
    "write_html",
    "accuracy_text",
    "fit_label",
    "seen_text",
    # benchmarks
    "BenchRow",
    "bench_report",
    "bench_settings",
    "plot_ttft",
    "run_bench",
    "ReadAheadBenchRow",
    "run_read_ahead_bench",
    "SessionBenchRow",
    "prefix_context_rss_bytes",
    "run_session_bench",
    # needle retrieval
    # calibration with its options (sample text, lengths, file, each measurement as it is made);
    # engine.api.calibrate_machine is the app's form of the same function
    "DEFAULT_LENGTHS",
    "Measurement",
    "calibrate_machine",
]
