"""What the routes share: the server's configuration, the engine's worker and the counters, held
on the app (app.state.serve) and handed to each route by `serve_state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from engine.api import RunSettings
from engine.serve.body import read_limited
from engine.serve.errors import ApiError
from engine.serve.guard import admit
from engine.serve.metrics import Metrics
from engine.serve.worker import EngineWorker


@dataclass(frozen=True)
class ModelFacts:
    """What the model lists say of the target (Ollama's /api/tags and /api/show)."""

    size: int = 0
    digest: str = ""
    family: str = ""
    parameter_size: str = ""
    n_parameters: int = 0
    quantization_level: str = ""
    context_length: int = 0
    modified_at: str = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class ServeConfig:
    model_id: str
    defaults: RunSettings
    default_mode: str = "auto"
    api_key: str | None = None
    max_body_bytes: int = 8 << 20
    facts: ModelFacts = field(default_factory=ModelFacts)
    shutdown_timeout_s: float = 30.0  # what a stream in flight gets to finish when the server stops


@dataclass(frozen=True)
class ServeState:
    worker: EngineWorker
    config: ServeConfig
    metrics: Metrics
    created: int  # when the server started (the model card's `created`)


def serve_state(request: Request) -> ServeState:
    return request.app.state.serve


def admitted(request: Request) -> None:
    """The routers' guard: the API key, or without one the loopback-only checks (engine.serve.guard)."""
    admit(request, serve_state(request).config.api_key)


async def body_of(request: Request) -> bytes:
    """The request's body, refused with 413 past the server's limit (declared or as it arrives)."""
    limit = serve_state(request).config.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is over the limit of {limit:,} bytes", code="body_too_large")
    return await read_limited(request.stream(), limit)


# What a route declares to get them (FastAPI's Annotated dependencies).
State = Annotated[ServeState, Depends(serve_state)]
RawBody = Annotated[bytes, Depends(body_of)]
