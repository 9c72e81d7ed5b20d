"""Read-ahead benchmark: the first question's wait with and without the draft's read-ahead.

For each length, on one document (the first N tokens of real text, as `bench`), in one run:
  cold_full   a one-shot full prefill (nothing cached)
  cold_spec   a one-shot SpecPrefill (the draft reads the whole prompt)
  read_ahead  a session's first question by SpecPrefill after Engine.read_ahead read the document
              (served_by spec_read_ahead); the read-ahead's own seconds are reported beside it
The cold runs come first and share no cache with the read-ahead's session, so they stay cold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

from engine.core.cancel import NEVER, CancelToken
from engine.core.events import EngineEvent, ReadAheadEnded, RunFinished, RunResult
from engine.core.settings import RunSettings
from engine.eval.bench import BENCH_QUESTION
from engine.pipeline import DocumentSession, Engine


@dataclass(frozen=True)
class ReadAheadBenchRow:
    tokens: int
    prompt_tokens: int
    cold_full_ttft_s: float
    cold_spec_ttft_s: float
    read_ahead_s: float  # the draft's read-ahead before the question (not in the TTFT)
    read_ahead_status: str  # ReadAheadEnded.status: done when it read the whole document
    read_ahead_spec_ttft_s: float  # the first question after it: the user's wait
    read_ahead_served_by: str
    read_ahead_draft_s: float  # the draft's part of that wait: the question's rows and the look-ahead

    @property
    def of_full(self) -> float:
        return self.read_ahead_spec_ttft_s / self.cold_full_ttft_s

    @property
    def of_spec(self) -> float:
        return self.read_ahead_spec_ttft_s / self.cold_spec_ttft_s

    def to_json(self) -> dict:
        return {**asdict(self), "of_cold_full": self.of_full, "of_cold_spec": self.of_spec}


def run_read_ahead_bench(
    engine: Engine, source_text: str, lengths: list[int], settings: RunSettings, cancel: CancelToken = NEVER
) -> Iterator[EngineEvent | ReadAheadEnded | ReadAheadBenchRow]:
    """Engine events as they come, each read-ahead's end, then one row per length."""
    tokens = engine.sample_tokens(source_text, max(lengths), "benchmark")
    session_settings = replace(settings, read_ahead=True, background_prefill=False)
    for n_tokens in lengths:
        text = engine.detokenize(tokens[:n_tokens])
        cold: dict[str, RunResult] = {}
        for event in engine.stream(text, BENCH_QUESTION, "both", settings, cancel):
            if isinstance(event, RunFinished):
                cold[event.run] = event.result
            yield event
        session = DocumentSession(text)
        ended = None
        for event in engine.read_ahead(session, session_settings, cancel):
            if isinstance(event, ReadAheadEnded):
                ended = event
                yield event
        after = None
        for event in engine.ask(session, BENCH_QUESTION, "spec", session_settings, cancel):
            if isinstance(event, RunFinished):
                after = event.result
            yield event
        engine.forget(session)  # the next length starts cold
        yield ReadAheadBenchRow(
            tokens=n_tokens,
            prompt_tokens=after.prompt_tokens,
            cold_full_ttft_s=cold["baseline"].ttft_s,
            cold_spec_ttft_s=cold["spec"].ttft_s,
            read_ahead_s=after.read_ahead_s,
            read_ahead_status=ended.status if ended else "",
            read_ahead_spec_ttft_s=after.ttft_s,
            read_ahead_served_by=after.served_by,
            read_ahead_draft_s=after.draft_s,
        )
