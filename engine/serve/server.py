"""Running the app under uvicorn, with a graceful shutdown: on SIGTERM or Ctrl-C the server stops
accepting connections, lets the requests in flight finish for up to `shutdown_timeout_s`, then
cancels what is left (each request's cancel token stops the engine) and returns normally."""

from __future__ import annotations

import logging

import uvicorn
from fastapi import FastAPI

log = logging.getLogger("specprefill.serve")


class GracefulServer(uvicorn.Server):
    """uvicorn's server, but a signal that shut it down is not raised again once it has stopped:
    a SIGTERM is a normal end (exit code 0), not a death by signal."""

    def handle_exit(self, sig, frame) -> None:
        if self.should_exit:
            self.force_exit = True  # a second signal: cancel what is left at once
        self.should_exit = True


def serve(app: FastAPI, host: str, port: int, shutdown_timeout_s: float, log_level: str = "info") -> None:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=shutdown_timeout_s,
        lifespan="on",
    )
    GracefulServer(config).run()
