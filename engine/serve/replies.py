"""The OpenAI response bodies (engine.serve.schemas): a chat completion, its stream's chunks, and
`usage` with the SpecPrefill extension (how the answer was prefilled and how fast its first token came)."""

from __future__ import annotations

import time
import uuid

from engine.api import RunResult
from engine.serve.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChunkChoice,
    Delta,
    Selection,
    SpecPrefillUsage,
    Usage,
)

FINISH_REASONS = {"eos": "stop", "max_new_tokens": "length"}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def specprefill_usage(result: RunResult) -> SpecPrefillUsage:
    spec = result.run == "spec" and not result.bypassed
    return SpecPrefillUsage(
        ttft_s=round(result.ttft_s, 4),
        mode="spec" if spec else "baseline",
        kept_fraction=round(result.kept_fraction, 4) if spec else 1.0,
        positions=result.positions,
        served_by=result.served_by,
        selection=Selection(
            prefill_tokens=result.prefill_tokens,
            keep_reason=result.keep_reason,
            bypassed=result.bypassed,
            bypass_reason=result.bypass_reason,
            fit=result.fit,
            seen_fraction=round(result.seen_fraction, 4),
            draft_s=round(result.draft_s, 4),
            select_s=round(result.select_s, 4),
            draft_peak_bytes=result.draft_peak_mem_bytes,
        ),
    )


def usage_of(result: RunResult) -> Usage:
    return Usage(
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.generated_tokens,
        total_tokens=result.prompt_tokens + result.generated_tokens,
        specprefill=specprefill_usage(result),
    )


def finish_reason(result: RunResult, stopped: bool) -> str:
    return "stop" if stopped else FINISH_REASONS.get(result.stop_reason, "stop")


def completion(cid: str, model: str, text: str, result: RunResult, stopped: bool) -> ChatCompletion:
    return ChatCompletion(
        id=cid,
        created=int(time.time()),
        model=model,
        choices=[
            Choice(message=AssistantMessage(content=text), finish_reason=finish_reason(result, stopped))
        ],
        usage=usage_of(result),
    )


def chunk(
    cid: str, model: str, delta: Delta | None = None, finish: str | None = None, usage: Usage | None = None
) -> ChatCompletionChunk:
    """One chunk of a stream: a delta, the last one's finish reason, or (choices empty) the usage."""
    choices = [] if usage is not None else [ChunkChoice(delta=delta or Delta(), finish_reason=finish)]
    return ChatCompletionChunk(id=cid, created=int(time.time()), model=model, choices=choices, usage=usage)
