"""The routes about the server itself: GET /health (no key needed) and GET /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from engine.serve.guard import admit
from engine.serve.schemas import Health
from engine.serve.state import admitted, serve_state

router = APIRouter()


@router.get("/health", response_model=Health)
async def health(request: Request) -> JSONResponse:
    """200 while the engine's worker is running; 503 while it restarts after a failure or shuts down."""
    state = serve_state(request)
    admit(request, state.config.api_key, needs_key=False)
    worker = state.worker
    status = "shutting_down" if worker.closing else "ok" if worker.healthy else "restarting"
    body = Health(
        status=status,
        model=state.config.model_id,
        running=worker.running,
        waiting=worker.waiting,
        capacity=worker.capacity,
        restarts=worker.restarts,
    )
    return JSONResponse(body.model_dump(), status_code=200 if status == "ok" else 503)


@router.get("/metrics", dependencies=[Depends(admitted)])
async def metrics(request: Request) -> PlainTextResponse:
    state = serve_state(request)
    text = state.metrics.render(state.worker.running, state.worker.waiting)
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
