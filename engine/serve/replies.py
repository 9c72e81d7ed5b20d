"""The OpenAI response shapes: a chat completion, its stream's chunks, and `usage` with the
SpecPrefill extension (how the answer was prefilled and how fast its first token came)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from engine.api import RunResult

FINISH_REASONS = {"eos": "stop", "max_new_tokens": "length"}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage_of(result: RunResult) -> dict[str, Any]:
    spec = result.run == "spec" and not result.bypassed
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.generated_tokens,
        "total_tokens": result.prompt_tokens + result.generated_tokens,
        "specprefill": {
            "ttft_s": round(result.ttft_s, 4),
            "mode": "spec" if spec else "baseline",
            "kept_fraction": round(result.kept_fraction, 4) if spec else 1.0,
            "positions": result.positions,
            "served_by": result.served_by,
            "selection": {
                "prefill_tokens": result.prefill_tokens,
                "keep_reason": result.keep_reason,
                "bypassed": result.bypassed,
                "bypass_reason": result.bypass_reason,
                "fit": result.fit,
                "seen_fraction": round(result.seen_fraction, 4),
                "draft_s": round(result.draft_s, 4),
                "select_s": round(result.select_s, 4),
            },
        },
    }


def finish_reason(result: RunResult, stopped: bool) -> str:
    return "stop" if stopped else FINISH_REASONS.get(result.stop_reason, "stop")


def completion(cid: str, model: str, text: str, result: RunResult, stopped: bool) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": finish_reason(result, stopped),
            }
        ],
        "usage": usage_of(result),
    }


def chunk(
    cid: str,
    model: str,
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One chunk of a stream: a delta, the last one's finish reason, or (choices empty) the usage."""
    choices = (
        []
        if usage is not None
        else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
    )
    body: dict[str, Any] = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        body["usage"] = usage
    return body


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event: `data: <json>` and a blank line."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


DONE = sse("[DONE]")


class StopScanner:
    """Cuts the answer at the first stop sequence. Text that may be the start of one is held back
    until the next pieces show whether it is."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.pending = ""
        self.stopped = False

    def feed(self, piece: str) -> str:
        """The text that can be sent now ("" once stopped)."""
        if self.stopped:
            return ""
        self.pending += piece
        cuts = [i for i in (self.pending.find(s) for s in self.stops) if i >= 0]
        if cuts:
            self.stopped = True
            out, self.pending = self.pending[: min(cuts)], ""
            return out
        hold = max(
            (n for s in self.stops for n in range(1, len(s)) if self.pending.endswith(s[:n])), default=0
        )
        out = self.pending[: len(self.pending) - hold]
        self.pending = self.pending[len(out) :]
        return out

    def flush(self) -> str:
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out
