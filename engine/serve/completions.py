"""POST /v1/chat/completions once it is parsed and queued: the answer as one JSON object, or
streamed as server-sent events (OpenAI's chunk format, `data: [DONE]` last). A client that goes
away cancels its generation: the wait for the next token checks for it every POLL_S."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from engine.api import (
    Cancelled,
    ContextOverflowError,
    EngineBusyError,
    InsufficientMemoryError,
    PositionsUnsupportedError,
    RunResult,
    SettingsError,
)
from engine.serve.body import ChatRequest
from engine.serve.errors import ApiError, error_body, for_status
from engine.serve.replies import DONE, StopScanner, chunk, completion, finish_reason, sse, usage_of
from engine.serve.worker import END, Job

POLL_S = 0.25  # how often a waiting request checks that its client is still there


class ClientGone(Exception):
    pass


def engine_error(exc: BaseException) -> ApiError:
    """An error the engine raised, as the client sees it."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Cancelled):
        return for_status(503, "the request was cancelled: the server is shutting down", "cancelled")
    if isinstance(exc, EngineBusyError):
        return for_status(429, str(exc), "engine_busy")
    if isinstance(exc, InsufficientMemoryError | MemoryError):
        return for_status(503, f"out of memory: {exc}", "out_of_memory")
    if isinstance(exc, ContextOverflowError | PositionsUnsupportedError | SettingsError | ValueError):
        return for_status(400, str(exc), "invalid_prompt")
    return for_status(500, f"the engine failed: {type(exc).__name__}: {exc}", "engine_error")


async def next_item(job: Job, is_disconnected) -> Any:
    """The job's next item; its client gone, the job is cancelled and ClientGone raised."""
    while True:
        try:
            return await asyncio.wait_for(job.items.get(), POLL_S)
        except TimeoutError:
            if await is_disconnected():
                job.cancel.cancel()
                raise ClientGone from None


async def collect(job: Job, is_disconnected, stops: tuple[str, ...]) -> tuple[str, RunResult, bool]:
    """The whole answer (cut at a stop sequence), its result, and whether a stop sequence ended it."""
    scanner, parts, result, error = StopScanner(stops), [], None, None
    while (item := await next_item(job, is_disconnected)) is not END:
        if isinstance(item, str):
            parts.append(scanner.feed(item))
        elif isinstance(item, RunResult):
            result = item
        elif isinstance(item, BaseException):
            error = item
    if error is not None or result is None:
        raise engine_error(error or Cancelled())
    parts.append(scanner.flush())
    return "".join(parts).strip(), result, scanner.stopped


async def complete(job: Job, chat: ChatRequest, cid: str, model: str, is_disconnected) -> dict[str, Any]:
    try:
        text, result, stopped = await collect(job, is_disconnected, chat.stops)
    finally:
        job.cancel.cancel()  # a no-op once it has ended; else (the client gone, an error) it stops the engine
    return completion(cid, model, text, result, stopped)


async def stream(job: Job, chat: ChatRequest, cid: str, model: str, is_disconnected) -> AsyncIterator[bytes]:
    """The answer's chunks; an error after the stream began is sent as an error event, then [DONE]."""
    scanner, result, error = StopScanner(chat.stops), None, None
    try:
        yield sse(chunk(cid, model, {"role": "assistant", "content": ""}))
        while (item := await next_item(job, is_disconnected)) is not END:
            if isinstance(item, str):
                if text := scanner.feed(item):
                    yield sse(chunk(cid, model, {"content": text}))
            elif isinstance(item, RunResult):
                result = item
            elif isinstance(item, BaseException):
                error = item
        if error is not None or result is None:
            api_error = engine_error(error or Cancelled())
            yield sse(error_body(api_error.message, api_error.type, api_error.param, api_error.code))
        else:
            if tail := scanner.flush():
                yield sse(chunk(cid, model, {"content": tail}))
            yield sse(chunk(cid, model, finish=finish_reason(result, scanner.stopped)))
            if chat.include_usage:
                yield sse(chunk(cid, model, usage=usage_of(result)))
        yield DONE
    except ClientGone:
        return
    finally:
        job.cancel.cancel()  # the response cancelled or closed (the client gone): the engine stops
