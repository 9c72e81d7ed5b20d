"""An answer as a Markdown file: the question, the answer, and one line of the run's facts."""

from __future__ import annotations

import re

from desktop.model.run_fit import with_fit
from engine.api import RunResult, format_count, format_percent_short, format_seconds

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")
NAME_WORDS = 6  # enough of the question to tell saved answers apart


def run_facts(result: RunResult) -> str:
    """TTFT, prefill tokens, kept share and positions, on one line; and how much of a document
    longer than the window the run saw, so a saved answer keeps that caveat."""
    kept = "100% (bypassed)" if result.bypassed else format_percent_short(result.kept_fraction)
    return with_fit(
        f"TTFT {format_seconds(result.ttft_s)} · prefill {format_count(result.prefill_tokens)} of "
        f"{format_count(result.prompt_tokens)} tokens · kept {kept} · positions {result.positions}",
        result,
    )


def answer_markdown(title: str, question: str, document: str, result: RunResult) -> str:
    source = f"Document: `{document}`\n\n" if document else ""
    return (
        f"# {title}\n\n{source}## Question\n\n{question}\n\n## Answer\n\n{result.answer.strip()}\n\n"
        f"---\n\n*{run_facts(result)}*\n"
    )


def suggested_file_name(run: str, question: str) -> str:
    """answer-spec-which-port-does-it-use.md"""
    words = _UNSAFE.sub(" ", question).lower().split()[:NAME_WORDS]
    return "-".join(["answer", run, *words]) + ".md"
