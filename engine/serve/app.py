"""The routes: GET /health, GET /v1/models, POST /v1/chat/completions (streamed or not) and
GET /metrics. Every error is an OpenAI error object; with an API key set, every route but
/health needs `Authorization: Bearer KEY` (compared in constant time)."""

from __future__ import annotations

import asyncio
import hmac
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from engine.api import RunSettings
from engine.serve.body import parse_chat_request, parse_json, read_limited
from engine.serve.completions import ClientGone, complete, stream
from engine.serve.errors import ApiError, for_status
from engine.serve.metrics import Metrics
from engine.serve.replies import completion_id
from engine.serve.worker import EngineWorker, QueueFull, ShuttingDown, job_for

CHAT_ROUTE = "/v1/chat/completions"


@dataclass(frozen=True)
class ServeConfig:
    model_id: str
    defaults: RunSettings
    default_mode: str = "auto"
    api_key: str | None = None
    max_body_bytes: int = 8 << 20


def key_matches(header: str | None, api_key: str) -> bool:
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), api_key.encode())


def create_app(worker: EngineWorker, config: ServeConfig, metrics: Metrics | None = None) -> FastAPI:
    metrics = metrics or worker.metrics
    created = int(time.time())

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await asyncio.to_thread(worker.stop)  # the in-flight requests are done or cancelled by now

    app = FastAPI(title="SpecPrefill", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    def refuse(error: ApiError, route: str) -> JSONResponse:
        metrics.count_request(route, error.status)
        return JSONResponse(error.body(), status_code=error.status, headers=error.headers)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return refuse(exc, request.url.path)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return refuse(
            for_status(exc.status_code, message, "not_found" if exc.status_code == 404 else None),
            request.url.path,
        )

    def authorize(request: Request) -> None:
        if config.api_key is not None and not key_matches(
            request.headers.get("authorization"), config.api_key
        ):
            raise ApiError(
                401,
                "a valid API key is required: send `Authorization: Bearer KEY`",
                type="authentication_error",
                code="invalid_api_key",
            )

    def model_card() -> dict:
        return {"id": config.model_id, "object": "model", "created": created, "owned_by": "specprefill"}

    @app.get("/health")
    async def health() -> JSONResponse:
        status = "ok" if not worker.closing else "shutting_down"
        body = {
            "status": status,
            "model": config.model_id,
            "running": worker.running,
            "waiting": worker.waiting,
            "capacity": worker.capacity,
        }
        return JSONResponse(body, status_code=200 if status == "ok" else 503)

    @app.get("/v1/models")
    async def models(request: Request) -> dict:
        authorize(request)
        metrics.count_request("/v1/models", 200)
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model}")
    async def model(model: str, request: Request) -> dict:
        authorize(request)
        if model != config.model_id:
            raise ApiError(
                404,
                f"the model {model!r} does not exist; this server serves {config.model_id!r}",
                param="model",
                code="model_not_found",
            )
        metrics.count_request("/v1/models", 200)
        return model_card()

    @app.get("/metrics")
    async def metrics_page(request: Request) -> PlainTextResponse:
        authorize(request)
        return PlainTextResponse(
            metrics.render(worker.running, worker.waiting), media_type="text/plain; version=0.0.4"
        )

    @app.post(CHAT_ROUTE)
    async def chat_completions(request: Request) -> Response:
        authorize(request)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > config.max_body_bytes:
            raise ApiError(
                413,
                f"the request body is over the limit of {config.max_body_bytes:,} bytes",
                code="body_too_large",
            )
        data = parse_json(await read_limited(request.stream(), config.max_body_bytes))
        chat = parse_chat_request(data, config.model_id, config.defaults, config.default_mode)
        job = job_for(chat, asyncio.get_running_loop())
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
        cid = completion_id()
        if chat.stream:
            metrics.count_request(CHAT_ROUTE, 200)
            return StreamingResponse(
                stream(job, chat, cid, config.model_id, request.is_disconnected),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            body = await complete(job, chat, cid, config.model_id, request.is_disconnected)
        except ClientGone:
            metrics.count_request(CHAT_ROUTE, 499)  # nginx's "client closed request": nobody reads this
            return Response(status_code=499)
        metrics.count_request(CHAT_ROUTE, 200)
        return JSONResponse(body)

    return app
