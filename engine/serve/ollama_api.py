"""Ollama's API beside OpenAI's, on the same port and through the same queue and caches:
GET /api/tags, GET /api/ps, POST /api/show, GET /api/version, POST /api/chat and POST /api/generate
(one JSON object, or a stream of them as NDJSON, one per line; streaming is Ollama's default).

The last object of an answer has Ollama's counts and durations (nanoseconds) and, beside them,
`specprefill`: how the answer was prefilled, as in the OpenAI API's usage."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import StreamingResponse

from engine.api import RunResult, app_version
from engine.serve.answers import CLIENT_CLOSED, ClientGone, collect, pieces_of, submit, watch_client
from engine.serve.body import ChatRequest, validated
from engine.serve.ollama_body import chat_request, check_ollama_model, generate_request, served_name
from engine.serve.ollama_schemas import (
    AssistantMessage,
    Details,
    GenerateRequest,
    ModelEntry,
    Reply,
    Running,
    RunningModel,
    Show,
    ShowRequest,
    Tags,
    Version,
)
from engine.serve.ollama_schemas import (
    ChatRequest as OllamaChat,
)
from engine.serve.replies import finish_reason, specprefill_usage
from engine.serve.state import RawBody, ServeState, State, admitted
from engine.serve.worker import Job

NDJSON = "application/x-ndjson"
NS = 1_000_000_000
router = APIRouter(prefix="/api", dependencies=[Depends(admitted)])


def now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def details(state: ServeState) -> Details:
    facts = state.config.facts
    family = facts.family or "unknown"
    return Details(
        family=family,
        families=[family],
        parameter_size=facts.parameter_size,
        quantization_level=facts.quantization_level,
    )


def model_entry(state: ServeState) -> ModelEntry:
    facts, name = state.config.facts, served_name(state.config.model_id)
    return ModelEntry(
        name=name,
        model=name,
        modified_at=facts.modified_at,
        size=facts.size,
        digest=facts.digest,
        details=details(state),
    )


@router.get("/tags", response_model=Tags)
async def tags(state: State) -> Tags:
    return Tags(models=[model_entry(state)])


@router.get("/ps", response_model=Running)
async def running(state: State) -> Running:
    """The one model, loaded for as long as the server runs."""
    entry = model_entry(state).model_dump()
    return Running(models=[RunningModel(**entry, expires_at="9999-12-31T23:59:59Z")])


@router.get("/version", response_model=Version)
async def version() -> Version:
    return Version(version=app_version())


@router.post("/show", response_model=Show)
async def show(raw: RawBody, state: State) -> Show:
    body = validated(ShowRequest, raw)
    check_ollama_model(body.model or body.name or "", state.config.model_id)
    facts = state.config.facts
    family = facts.family or "unknown"
    info = {"general.architecture": family, "general.parameter_count": facts.n_parameters}
    if facts.context_length:
        info[f"{family}.context_length"] = facts.context_length
    return Show(
        details=details(state),
        model_info=info,
        capabilities=["completion"],
        modified_at=facts.modified_at,
        parameters=f"num_predict {state.config.defaults.max_new_tokens}",
    )


@router.post("/chat")
async def chat(request: Request, raw: RawBody, state: State):
    body = validated(OllamaChat, raw)
    if not body.messages:  # Ollama's way to load a model: it is loaded already
        return loaded_reply(state, chat=True)
    c = state.config
    return await answer(request, state, chat_request(body, c.model_id, c.defaults, c.default_mode), True)


@router.post("/generate")
async def generate(request: Request, raw: RawBody, state: State):
    body = validated(GenerateRequest, raw)
    if not body.prompt.strip():
        return loaded_reply(state, chat=False)
    c = state.config
    return await answer(request, state, generate_request(body, c.model_id, c.defaults, c.default_mode), False)


def loaded_reply(state: ServeState, chat: bool) -> Response:
    reply = text_reply(served_name(state.config.model_id), chat, "")
    reply.done, reply.done_reason = True, "load"
    return Response(reply.model_dump_json(exclude_none=True), media_type="application/json")


async def answer(request: Request, state: ServeState, chat: ChatRequest, is_chat: bool) -> Response:
    job = submit(state.worker, chat)
    start = time.perf_counter()
    model = served_name(state.config.model_id)
    if chat.stream:
        lines = ndjson(job, model, is_chat, start, request)
        return StreamingResponse(lines, media_type=NDJSON)
    try:
        whole = await collect(job, request.is_disconnected)
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    reply = final_reply(model, is_chat, whole.text, whole.result, whole.stopped, start)
    return Response(reply.model_dump_json(exclude_none=True), media_type="application/json")


def text_reply(model: str, is_chat: bool, text: str) -> Reply:
    reply = Reply(model=model, created_at=now(), done=False)
    if is_chat:
        reply.message = AssistantMessage(content=text)
    else:
        reply.response = text
    return reply


def final_reply(
    model: str, is_chat: bool, text: str, result: RunResult, stopped: bool, start: float
) -> Reply:
    reply = text_reply(model, is_chat, text)
    decode_s = result.generated_tokens / result.decode_tok_s if result.decode_tok_s > 0 else 0.0
    reply.done = True
    reply.done_reason = finish_reason(result, stopped)
    reply.total_duration = int((time.perf_counter() - start) * NS)
    reply.load_duration = 0
    reply.prompt_eval_count = result.prompt_tokens
    reply.prompt_eval_duration = int(result.ttft_s * NS)
    reply.eval_count = result.generated_tokens
    reply.eval_duration = int(decode_s * NS)
    reply.specprefill = specprefill_usage(result)
    return reply


async def ndjson(job: Job, model: str, is_chat: bool, start: float, request: Request) -> AsyncIterator[str]:
    """One JSON object a line: the answer's pieces, then the last one with the counts (or an error)."""
    gone = asyncio.Event()
    watcher = asyncio.create_task(watch_client(job, request.is_disconnected, gone))
    try:
        async for piece in pieces_of(job):
            if piece.text:
                yield text_reply(model, is_chat, piece.text).model_dump_json(exclude_none=True) + "\n"
            elif piece.error is not None:
                yield json.dumps(piece.error.ollama_body()) + "\n"
            elif piece.result is not None:
                last = final_reply(model, is_chat, "", piece.result, piece.stopped, start)
                yield last.model_dump_json(exclude_none=True) + "\n"
    finally:
        watcher.cancel()
