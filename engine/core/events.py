"""Typed events streamed by the engine's generators.

The CLI prints them, the GUI forwards them through Qt signals. Every event
names the run it belongs to ("baseline" or "spec") so two panes can follow
one stream.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

RunName = Literal["baseline", "spec"]
Stage = Literal["tokenizing", "draft", "select", "prefill", "generating", "done"]


def run_json(record, spec_only: tuple[str, ...]) -> dict:
    """A per-run dataclass as JSON: without its `run` name, and without the SpecPrefill-only
    fields when it is the baseline's (the run is the key it is stored under)."""
    left_out = {"run", *(spec_only if record.run == "baseline" else ())}
    return {name: value for name, value in asdict(record).items() if name not in left_out}


def run_order(mode: str, spec_first: bool = False) -> list[RunName]:
    """The runs a request in `mode` makes, in the order they run."""
    if mode != "both":
        return [mode]  # type: ignore[list-item]
    return ["spec", "baseline"] if spec_first else ["baseline", "spec"]


@dataclass(frozen=True)
class StageChanged:
    run: RunName
    stage: Stage
    detail: str = ""


@dataclass(frozen=True)
class Progress:
    """done of total units (tokens) in the current stage."""

    run: RunName
    stage: Stage
    done: int
    total: int


@dataclass(frozen=True)
class TokenGenerated:
    run: RunName
    text: str  # the decoded text of this token (may be empty for a partial UTF-8 sequence)
    index: int  # 0-based index of the generated token


@dataclass(frozen=True)
class Selection:
    """What the draft kept: chunk spans in prompt tokens and their scores."""

    chunk_size: int
    chunk_starts: list[int]  # token index where each chunk starts
    chunk_scores: list[float]  # what chunks are ranked by: mean importance (with question words: ranks)
    kept_chunks: list[int]  # indices of kept chunks, ascending
    protected_chunks: list[int]  # chunks kept regardless of score (head, question tail)
    token_char_offsets: list[int]  # char offset in the prompt text where each token starts
    doc_char_span: tuple[int, int]  # where the document text sits in the prompt text


@dataclass(frozen=True)
class SelectionMade:
    run: RunName
    selection: Selection


@dataclass(frozen=True)
class RunResult:
    run: RunName
    answer: str
    prompt_tokens: int
    prefill_tokens: int
    ttft_s: float
    decode_tok_s: float
    generated_tokens: int
    tokenize_s: float
    target_prefill_s: float
    draft_s: float = 0.0
    select_s: float = 0.0
    kept_fraction: float = 1.0
    positions: str = "contiguous"  # restore | renumber for spec; contiguous for baseline
    bypassed: bool = False
    bypass_reason: str = ""
    draft_peak_mem_bytes: int = 0  # CPU: weights + peak RSS growth while scoring; CUDA: max allocated
    draft_window: int = 0  # the draft prefill's attention window (0: full attention)
    stop_reason: str = ""  # eos | max_new_tokens | stop (the reader had enough: a stop sequence)
    truncated_tokens: int = 0  # document tokens cut to fit the context (RunSettings.truncate)
    truncated_chars: int = 0
    # How a session run's prefill was served (engine.pipeline.session.ServedBy); "" for one-shot runs
    served_by: str = ""
    document_tokens: int = 0  # the whole document's tokens, cut or not
    # fits | selected (too long, SpecPrefill's selection made it fit) | truncated (too long, cut to fit)
    fit: str = "fits"
    seen_fraction: float = 1.0  # the share of the document's tokens the target saw
    keep_reason: str = ""  # why keep=auto chose kept_fraction's keep ("" for a fixed keep)
    covered_parts: int = 0  # pages, sections or files the selection covered first (0: coverage off)
    focused_parts: list[str] = field(
        default_factory=list
    )  # definitions and files the question names, kept first
    # The draft's read-ahead of the document before this question (spec_read_ahead): seconds of draft
    # work the TTFT does not count, so that none is hidden; 0.0 when none
    read_ahead_s: float = 0.0
    # How SpecPrefill's selection reached the target: "tokens" (one vocabulary) or "spans" (the
    # draft's kept characters, another family's draft); "" for the full prefill
    selection: str = ""
    # The draft's number format in SpecPrefill's run: "int8", "bf16", "fp32" or "fp16"
    # (engine.draft.precision); "" for the full prefill and a bypassed run
    draft_precision: str = ""

    SPEC_ONLY = (
        "draft_s",
        "select_s",
        "kept_fraction",
        "positions",
        "bypassed",
        "bypass_reason",
        "draft_peak_mem_bytes",
        "draft_window",
    )

    def to_json(self) -> dict:
        data = run_json(self, self.SPEC_ONLY)
        for optional in (
            "served_by",
            "keep_reason",
            "covered_parts",
            "focused_parts",
            "selection",
            "draft_precision",
        ):
            if optional in data and not data[optional]:
                del data[optional]  # unused: the JSON (run, bench, saved A/B reports) stays as it was
        if not self.served_by:
            del data["read_ahead_s"]  # one-shot runs never read ahead; a session's answers always say
        return data


@dataclass(frozen=True)
class RunFinished:
    run: RunName
    result: RunResult


@dataclass(frozen=True)
class Notice:
    """A one-line message for the user (bypass, fallback to renumber, warnings)."""

    run: RunName | None
    message: str


EngineEvent = StageChanged | Progress | TokenGenerated | SelectionMade | RunFinished | Notice

# How a session's answer was prefilled (RunResult.served_by), and how the app names each path.
SERVED_BY_LABELS: dict[str, str] = {
    "cold_full": "cold full prefill",
    "cached_full": "full prefill from the cache",
    "saved_state": "full prefill from the saved state",
    "spec": "SpecPrefill",
    "spec_cached_draft": "SpecPrefill with the cached draft",
    "spec_read_ahead": "SpecPrefill after the draft read ahead",
}


@dataclass(frozen=True)
class BackgroundProgress:
    """The background full prefill of a session's document prefix: tokens done of total."""

    done: int
    total: int


# done: the full prefix is cached (and saved); paused: a question took the target, the next call
# resumes; cancelled: its own Cancel; not_needed: nothing to fill; failed: detail says why.
BackgroundStatus = Literal["done", "paused", "cancelled", "not_needed", "failed"]


@dataclass(frozen=True)
class BackgroundEnded:
    status: BackgroundStatus
    done: int
    total: int
    seconds: float  # spent prefilling in this call
    detail: str = ""


BackgroundEvent = BackgroundProgress | BackgroundEnded


@dataclass(frozen=True)
class ReadAheadProgress:
    """The draft's read-ahead of an opened document's prefix: tokens read of total."""

    done: int
    total: int


# done: the draft's cache holds the whole prefix; paused: a question took over (it drafts the rest);
# cancelled: its own Cancel; not_needed: read already, or too long to read in one pass; off: the setting
# or the draft cache is off; failed: detail says why.
ReadAheadStatus = Literal["done", "paused", "cancelled", "not_needed", "off", "failed"]


@dataclass(frozen=True)
class ReadAheadEnded:
    status: ReadAheadStatus
    done: int
    total: int
    seconds: float  # the draft's time in this call
    detail: str = ""


ReadAheadEvent = ReadAheadProgress | ReadAheadEnded


@dataclass
class CompareResult:
    prompt_tokens: int
    runs: dict[str, RunResult] = field(default_factory=dict)
