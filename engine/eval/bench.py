"""TTFT benchmark: baseline vs SpecPrefill at several prompt lengths, on real text.

Each length takes the first N tokens of the document's text (the text repeats when it is
shorter) plus a fixed question, so every length measures real prose or code. A length longer
than the target's window is measured too: the baseline cuts the document to fit, SpecPrefill
fits it by selection, and each row says how much of the document each run saw.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

from engine.core.atomic import write_bytes_atomic
from engine.core.cancel import NEVER, CancelToken
from engine.core.events import EngineEvent, RunFinished, RunResult
from engine.core.settings import RunSettings, greedy
from engine.eval.labels import without_unknown_fit
from engine.pipeline import Engine, EngineInfo

BENCH_QUESTION = "Summarize the main topic of this document in one sentence."


@dataclass(frozen=True)
class BenchRow:
    tokens: int  # document tokens asked for
    prompt_tokens: int  # with the chat template and the question
    baseline_ttft_s: float
    spec_ttft_s: float
    tokenize_s: float
    draft_s: float
    select_s: float
    target_prefill_s: float
    baseline_prefill_s: float
    speedup: float
    kept_fraction: float
    positions: str
    bypassed: bool
    draft_peak_mem_bytes: int
    overhead_s: float  # spec TTFT not spent in draft or target prefill
    draft_window: int  # the draft prefill's attention window (0: full attention)
    # How each run fit the target's window (RunResult.fit, .seen_fraction); reports written before
    # have none of these: document_tokens 0 reads as unknown.
    document_tokens: int = 0  # the document's tokens as the engine counted them
    baseline_fit: str = "fits"
    baseline_seen_fraction: float = 1.0
    spec_fit: str = "fits"
    spec_seen_fraction: float = 1.0
    # The draft's seconds per 1K prompt tokens (the target's count); 0.0 in reports from before it
    draft_s_per_1k: float = 0.0

    FIT_FIELDS = (
        "document_tokens",
        "baseline_fit",
        "baseline_seen_fraction",
        "spec_fit",
        "spec_seen_fraction",
    )

    def to_json(self) -> dict:
        data = without_unknown_fit(asdict(self), self.document_tokens, self.FIT_FIELDS)
        if not self.draft_s_per_1k:
            del data["draft_s_per_1k"]  # a report from before it was recorded writes back as it was
        return data

    @classmethod
    def from_json(cls, data: dict) -> BenchRow:
        return cls(**data)


@dataclass(frozen=True)
class BenchModels:
    target: str
    draft: str
    device: str
    restore_supported: bool
    target_device: str = "CPU"  # reports written before the GPU path have no such field
    flash_attn: str | None = None  # the target's flash attention ("on", "off", "auto"); None: not recorded
    target_backends: tuple[str, ...] | None = None  # "CPU", "RPC HOST:PORT"...; None: not recorded
    cpu_path: str | None = None  # llama.cpp's CPU variant, extra buffers, self-test; None: not recorded
    draft_precision: str | None = (
        None  # the draft's number format (engine.draft.precision); None: not recorded
    )
    draft_precision_reason: str | None = None
    # The draft's plain forward in that format, seconds per 1K tokens, as measured when it was chosen
    draft_forward_s_per_1k: float | None = None


@dataclass(frozen=True)
class BenchReport:
    """What `specprefill bench --json` prints: one row per length, and what they were measured with."""

    results: tuple[BenchRow, ...]
    keep: float | str  # a fraction, or "auto"
    doc: str
    models: BenchModels

    def to_json(self) -> dict:
        # Fields a report from before they were recorded lacks: it writes back as it was.
        models = {name: value for name, value in asdict(self.models).items() if value is not None}
        if "target_backends" in models:
            models["target_backends"] = list(models["target_backends"])
        return {
            "results": [row.to_json() for row in self.results],
            "keep": self.keep,
            "doc": self.doc,
            "models": models,
        }

    @classmethod
    def from_json(cls, data: dict) -> BenchReport:
        return cls(
            results=tuple(BenchRow.from_json(row) for row in data["results"]),
            keep=data["keep"],
            doc=data["doc"],
            models=BenchModels(**{**data["models"], **_backends_of(data["models"])}),
        )


def _backends_of(models: dict) -> dict:
    backends = models.get("target_backends")
    return {} if backends is None else {"target_backends": tuple(backends)}


def bench_report(rows: list[BenchRow], keep: float | str, doc: str, info: EngineInfo) -> BenchReport:
    """The report of `rows`, measured on `doc` with the engine `info` describes."""
    return BenchReport(
        results=tuple(rows),
        keep=keep,
        doc=doc,
        models=BenchModels(
            target=info.target_name,
            draft=info.draft_name,
            device=info.device,
            restore_supported=info.positions_supported,
            target_device=info.target_device,
            flash_attn=info.flash_attn,
            target_backends=info.target_backends,
            cpu_path=info.cpu_path or None,
            draft_precision=info.draft_precision or None,
            draft_precision_reason=info.draft_precision_reason or None,
            draft_forward_s_per_1k=info.draft_forward_s_per_1k or None,
        ),
    )


def bench_row(n_tokens: int, baseline: RunResult, spec: RunResult) -> BenchRow:
    return BenchRow(
        tokens=n_tokens,
        prompt_tokens=spec.prompt_tokens,
        baseline_ttft_s=baseline.ttft_s,
        spec_ttft_s=spec.ttft_s,
        tokenize_s=spec.tokenize_s,
        draft_s=spec.draft_s,
        select_s=spec.select_s,
        target_prefill_s=spec.target_prefill_s,
        baseline_prefill_s=baseline.target_prefill_s,
        speedup=baseline.ttft_s / spec.ttft_s if spec.ttft_s > 0 else 0.0,
        kept_fraction=spec.kept_fraction,
        positions=spec.positions,
        bypassed=spec.bypassed,
        draft_peak_mem_bytes=spec.draft_peak_mem_bytes,
        overhead_s=spec.ttft_s - spec.draft_s - spec.target_prefill_s,
        draft_window=spec.draft_window,
        document_tokens=spec.document_tokens,
        baseline_fit=baseline.fit,
        baseline_seen_fraction=baseline.seen_fraction,
        spec_fit=spec.fit,
        spec_seen_fraction=spec.seen_fraction,
        draft_s_per_1k=round(spec.draft_s * 1000 / spec.prompt_tokens, 3) if spec.prompt_tokens else 0.0,
    )


def run_bench(
    engine: Engine, source_text: str, lengths: list[int], settings: RunSettings, cancel: CancelToken = NEVER
) -> Iterator[EngineEvent | BenchRow]:
    """Engine events as they come, then one BenchRow per length."""
    tokens = engine.sample_tokens(source_text, max(lengths), "benchmark")  # tokenized once
    for n_tokens in lengths:
        text = engine.detokenize(tokens[:n_tokens])
        results: dict[str, RunResult] = {}
        for event in engine.stream(text, BENCH_QUESTION, "both", settings, cancel):
            if isinstance(event, RunFinished):
                results[event.run] = event.result
            yield event
        yield bench_row(n_tokens, results["baseline"], results["spec"])


def bench_settings(base: RunSettings, respect_threshold: bool) -> RunSettings:
    """Bench measures SpecPrefill itself unless asked to measure the bypass below the threshold. It
    decodes greedily: both runs then answer by the same rule, and a rerun times the same tokens."""
    return replace(greedy(base), force=not respect_threshold)


def plot_ttft(rows: list[BenchRow], out_path, title: str) -> None:
    import matplotlib  # lazy: matplotlib takes a second to import and only --plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r.prompt_tokens for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(x, [r.baseline_ttft_s for r in rows], "o-", label="Full prefill (baseline)", color="#555")
    ax.plot(x, [r.spec_ttft_s for r in rows], "o-", label="SpecPrefill", color="#1f77b4")
    ax.plot(x, [r.draft_s for r in rows], "--", label="  of which draft scoring", color="#ff7f0e")
    for r in rows:
        ax.annotate(
            f"{r.speedup:.2f}x",
            (r.prompt_tokens, r.spec_ttft_s),
            textcoords="offset points",
            xytext=(0, -14),
            ha="center",
            fontsize=8,
        )
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("time to first token (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_bytes_atomic(out_path, buf.getvalue())
