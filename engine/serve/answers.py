"""A parsed request's way through the engine, whichever API it came by: queued on the worker,
then its answer collected whole or handed over piece by piece.

A client that goes away cancels its generation. A non-streaming request's client is checked on a
timer (every POLL_S) while its answer is made, tokens or not; a stream's is watched by its
response (sse-starlette, or the NDJSON response's own disconnect listener)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from engine.api import Cancelled, RunResult
from engine.serve.body import ChatRequest
from engine.serve.errors import ApiError, engine_error, for_status
from engine.serve.worker import END, EngineWorker, Job, QueueFull, ShuttingDown

POLL_S = 0.25  # how often a waiting request checks that its client is still there
CLIENT_CLOSED = 499  # nginx's "client closed request": the status of an answer nobody waited for
Disconnected = Callable[[], Awaitable[bool]]


class ClientGone(Exception):
    pass


@dataclass(frozen=True)
class Answer:
    text: str
    result: RunResult
    stopped: bool  # a stop sequence ended it


def submit(worker: EngineWorker, chat: ChatRequest) -> Job:
    """Queue the request; a full queue is a 429 with Retry-After, a shutdown a 503."""
    c = chat.conversation
    job = Job(c.document, c.question, chat.mode, chat.settings, asyncio.get_running_loop(), chat.stops)
    try:
        worker.submit(job)
    except QueueFull as exc:
        raise ApiError(
            429,
            str(exc),
            type="rate_limit_error",
            code="queue_full",
            headers={"Retry-After": str(exc.retry_after_s)},
        ) from None
    except ShuttingDown as exc:
        raise for_status(503, str(exc), "shutting_down") from None
    return job


async def watch_client(job: Job, is_disconnected: Disconnected, gone: asyncio.Event) -> None:
    """Every POLL_S until cancelled: a client that has left cancels the job."""
    while not job.cancel.cancelled:
        await asyncio.sleep(POLL_S)
        if await is_disconnected():
            gone.set()
            job.cancel.cancel()
            return


async def items_of(job: Job) -> AsyncIterator[Any]:
    """The job's items up to END; closed early (the client gone, the response ended), it cancels the job."""
    try:
        while (item := await job.items.get()) is not END:
            yield item
    finally:
        job.cancel.cancel()  # a no-op once the job has ended


async def collect(job: Job, is_disconnected: Disconnected) -> Answer:
    """The whole answer; ClientGone when the client left before it was done."""
    gone = asyncio.Event()
    watcher = asyncio.create_task(watch_client(job, is_disconnected, gone))
    parts, result, error = [], None, None
    try:
        async for item in items_of(job):
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, RunResult):
                result = item
            elif isinstance(item, BaseException):
                error = item
    finally:
        watcher.cancel()
    if gone.is_set():
        raise ClientGone
    if error is not None or result is None:
        raise engine_error(error or Cancelled())
    return Answer("".join(parts).strip(), result, job.stopped)


@dataclass(frozen=True)
class Piece:
    """One step of a streamed answer: text, or the end (result, or the error to send instead)."""

    text: str = ""
    result: RunResult | None = None
    error: ApiError | None = None
    stopped: bool = False


async def pieces_of(job: Job) -> AsyncIterator[Piece]:
    """The answer's text as it comes, then one last Piece with its result or its error."""
    result, error = None, None
    async for item in items_of(job):
        if isinstance(item, str):
            yield Piece(text=item)
        elif isinstance(item, RunResult):
            result = item
        elif isinstance(item, BaseException):
            error = item
    if error is not None or result is None:
        yield Piece(error=engine_error(error or Cancelled()))
    else:
        yield Piece(result=result, stopped=job.stopped)
