"""The server as a FastAPI app: its routers (engine.serve.service, openai_api, ollama_api), who may
use it (engine.serve.guard), its error objects, and the counting of every response by route.

Every error is an error object: OpenAI's on /v1 and the service routes, Ollama's on /api."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.serve import ollama_api, openai_api, service
from engine.serve.answers import CLIENT_CLOSED
from engine.serve.errors import ApiError, bad_request, for_status
from engine.serve.metrics import UNMATCHED, Metrics
from engine.serve.state import ServeConfig, ServeState
from engine.serve.worker import EngineWorker

__all__ = ["ServeConfig", "create_app"]
log = logging.getLogger("specprefill.serve")
OLLAMA_PREFIX = "/api/"


def error_response(request: Request, error: ApiError) -> JSONResponse:
    body = error.ollama_body() if request.url.path.startswith(OLLAMA_PREFIX) else error.body()
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request, exc)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404:
            error = for_status(404, f"no route for {request.method} {request.url.path[:200]}", "not_found")
        else:
            error = for_status(exc.status_code, str(exc.detail))
        return error_response(request, error)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
        return error_response(request, bad_request(f"{where or 'the request'}: {first['msg']}", where))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path[:200], exc_info=exc)
        return error_response(
            request, for_status(500, "the server failed; its log has the details", "server_error")
        )


class CountResponses:
    """ASGI middleware: every HTTP response counted by its route's template and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = CLIENT_CLOSED

        async def send_counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_counted)
        finally:
            route = scope.get("route")
            self.metrics.count_request(getattr(route, "path", UNMATCHED), status)


def create_app(worker: EngineWorker, config: ServeConfig, metrics: Metrics | None = None) -> FastAPI:
    metrics = metrics or worker.metrics

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await asyncio.to_thread(worker.stop)  # the in-flight requests are done or cancelled by now

    app = FastAPI(title="SpecPrefill", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve = ServeState(worker, config, metrics, int(time.time()))
    install_error_handlers(app)
    for module in (service, openai_api, ollama_api):
        app.include_router(module.router)
    app.add_middleware(CountResponses, metrics=metrics)
    return app
