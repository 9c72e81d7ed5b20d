"""OpenAI's API: GET /v1/models, GET /v1/models/{model} and POST /v1/chat/completions, answered as
one JSON object or streamed as server-sent events (OpenAI's chunk format, `data: [DONE]` last)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Request, Response
from sse_starlette import EventSourceResponse

from engine.serve.answers import CLIENT_CLOSED, ClientGone, collect, pieces_of, submit
from engine.serve.body import ChatRequest, check_model, openai_chat_request, validated
from engine.serve.replies import chunk, completion, completion_id, finish_reason, usage_of
from engine.serve.schemas import ChatCompletion, ChatCompletionRequest, Delta, ModelCard, ModelList
from engine.serve.state import RawBody, ServeState, State, admitted
from engine.serve.worker import Job

router = APIRouter(prefix="/v1", dependencies=[Depends(admitted)])


def model_card(state: ServeState) -> ModelCard:
    return ModelCard(id=state.config.model_id, created=state.created)


@router.get("/models", response_model=ModelList)
async def models(state: State) -> ModelList:
    return ModelList(data=[model_card(state)])


@router.get("/models/{model}", response_model=ModelCard)
async def model(model: str, state: State) -> ModelCard:
    check_model(model, state.config.model_id)
    return model_card(state)


@router.post("/chat/completions", response_model=ChatCompletion)
async def chat_completions(request: Request, raw: RawBody, state: State) -> Response:
    config = state.config
    body = validated(ChatCompletionRequest, raw)
    chat = openai_chat_request(body, config.model_id, config.defaults, config.default_mode)
    job = submit(state.worker, chat)
    cid = completion_id()
    if chat.stream:
        # On SIGTERM a stream in flight may finish, as a non-streamed answer may, within the server's
        # graceful shutdown (sse-starlette's default would cut it at once).
        grace = max(config.shutdown_timeout_s - 0.5, 0.0)
        stream = events(job, chat, cid, config.model_id)
        return EventSourceResponse(stream, sep="\n", ping=15, shutdown_grace_period=grace)
    try:
        answer = await collect(job, request.is_disconnected)
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)  # nobody reads it
    reply = completion(cid, config.model_id, answer.text, answer.result, answer.stopped)
    return Response(reply.model_dump_json(), media_type="application/json")


async def events(job: Job, chat: ChatRequest, cid: str, model: str) -> AsyncIterator[dict]:
    """The answer's chunks; an error after the stream began is sent as an error event, then [DONE]."""
    yield {"data": chunk(cid, model, Delta(role="assistant", content="")).model_dump_json()}
    async for piece in pieces_of(job):
        if piece.text:
            yield {"data": chunk(cid, model, Delta(content=piece.text)).model_dump_json()}
        elif piece.error is not None:
            yield {"data": json.dumps(piece.error.body())}
        elif piece.result is not None:
            finish = finish_reason(piece.result, piece.stopped)
            yield {"data": chunk(cid, model, finish=finish).model_dump_json()}
            if chat.include_usage:
                yield {"data": chunk(cid, model, usage=usage_of(piece.result)).model_dump_json()}
    yield {"data": "[DONE]"}
