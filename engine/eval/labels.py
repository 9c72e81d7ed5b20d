"""How an A/B run reads in tables, progress lines and files: its label ("baseline", "keep 0.2")
and the notes that set it apart from a plain cold run (served from a cache, a document cut or
fit by selection, bypassed, how keep auto chose).

    run_label("0.2") == "keep 0.2"; run_notes(result) == ["cached: full prefill from the cache"]
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.events import SERVED_BY_LABELS, RunResult
from engine.core.formatting import format_count, format_percent_short

BASELINE = "baseline"
CACHED = "cached"  # how tables and files label the TTFT of a run served from a cache
# Prefills paid in full: one-shot runs (""), a session's cold full prefill, its SpecPrefill run.
# Any other served_by (cached_full, saved_state, spec_cached_draft, a later one) came from a cache.
COLD_SERVED_BY = frozenset({"", "cold_full", "spec"})


def run_label(keep: str | None) -> str:
    """How a run is named in tables and progress: "baseline" or "keep 0.2"."""
    return BASELINE if keep is None else f"keep {keep}"


def is_cached(result: RunResult) -> bool:
    """True when the run's prefill came from a cache: its TTFT is not a cold one and never joins cold means."""
    return result.served_by not in COLD_SERVED_BY


def cached_note(result: RunResult) -> str:
    """ "cached: full prefill from the cache" for a cached run, "" for a cold one: a TTFT's label."""
    if not is_cached(result):
        return ""
    return f"{CACHED}: {SERVED_BY_LABELS.get(result.served_by, result.served_by)}"


# How a run whose document was longer than the target's window made it fit (RunResult.fit);
# "fits" has no label: such a run saw the whole document.
FIT_LABELS = {"truncated": "truncated", "selected": "fit by selection"}
FIT_FIELDS = ("document_tokens", "fit", "seen_fraction")  # RunResult's fields since #11


def seen_text(seen_fraction: float, document_tokens: int = 0) -> str:
    """ "saw 52% of the document", or with its size "saw 52% of 212,400 document tokens"."""
    whole = f"{format_count(document_tokens)} document tokens" if document_tokens else "the document"
    return f"saw {format_percent_short(seen_fraction)} of {whole}"


def fit_label(fit: str, seen_fraction: float, document_tokens: int = 0) -> str:
    """ "truncated: saw 52% of the document", "fit by selection: saw 18% of the document"; "" when it fit."""
    if fit not in FIT_LABELS:
        return ""
    return f"{FIT_LABELS[fit]}: {seen_text(seen_fraction, document_tokens)}"


def fit_note(result: RunResult) -> str:
    """How much of a too-long document the run saw, "" when the document fit: a run's label beside cached_note."""
    return fit_label(result.fit, result.seen_fraction)


def run_notes(result: RunResult) -> list[str]:
    """What sets a run apart from a plain cold one, for a TTFT's parenthesis: cached, cut or selected, bypassed."""
    notes = [cached_note(result), fit_note(result), "bypassed" if result.bypassed else ""]
    return [note for note in notes if note]


def selection_note(result: RunResult) -> str:
    """How the SpecPrefill run chose what it kept, when not by a fixed keep alone:
    "keep auto chose 12%: the relevant text is concentrated; src/a.py kept first (named in the
    question); every one of 27 parts covered"."""
    notes = []
    if result.keep_reason:
        notes.append(f"keep auto chose {format_percent_short(result.kept_fraction)}: {result.keep_reason}")
    if result.focused_parts:
        notes.append(f"{', '.join(result.focused_parts)} kept first (named in the question)")
    if result.covered_parts:
        notes.append(f"every one of {format_count(result.covered_parts, 'part')} covered")
    return "; ".join(notes)


def fit_tally(results: Sequence[RunResult]) -> str:
    """ "2 of 3 runs truncated, seeing 52% of the document on average"; "" when every run's document fit."""
    parts = []
    for fit, label in FIT_LABELS.items():
        seen = [r.seen_fraction for r in results if r.fit == fit]
        if seen:
            parts.append(
                f"{len(seen)} of {format_count(len(results), 'run')} {label}, seeing "
                f"{format_percent_short(sum(seen) / len(seen))} of the document on average"
            )
    return "; ".join(parts)


def without_unknown_fit(data: dict, document_tokens: int, fields: Sequence[str] = FIT_FIELDS) -> dict:
    """`data` less the fit fields when they were never measured (document_tokens 0: a record written
    before long documents were fitted), so an old report writes out as it was read."""
    if document_tokens:
        return data
    return {name: value for name, value in data.items() if name not in fields}
