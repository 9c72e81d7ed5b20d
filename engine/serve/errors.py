"""The errors a client sees: OpenAI's error object {"error": {"message", "type", "param", "code"}},
or Ollama's {"error": "message"} on Ollama's routes, with an HTTP status. The text is the server's
own: an exception's text reaches a client only with any file path in it replaced, and an
unexpected failure only as "the engine failed" (its details go to the server's log)."""

from __future__ import annotations

import logging
import re
from typing import Any

from engine.api import (
    Cancelled,
    ContextOverflowError,
    EngineBusyError,
    InsufficientMemoryError,
    PositionsUnsupportedError,
    SettingsError,
)

log = logging.getLogger("specprefill.serve")
# An absolute or home-relative path: /a/b, ~/a, C:\a (what an exception's text may carry).
PATH = re.compile(r"(?<![\w.:/])(?:~?/|[A-Za-z]:\\)[^\s'\"()\[\],;]+")


class ApiError(Exception):
    """An error the client gets as an error object, with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """OpenAI's error object."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def ollama_body(self) -> dict[str, Any]:
        """Ollama's error object."""
        return {"error": self.message}


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def unsupported(param: str, message: str) -> ApiError:
    """A field this server cannot honour: refused, never silently ignored."""
    return ApiError(400, message, param=param, code="unsupported_parameter")


# The error type OpenAI's clients expect for each status this server answers with.
STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


def for_status(status: int, message: str, code: str | None = None) -> ApiError:
    return ApiError(status, message, type=STATUS_TYPES.get(status, "invalid_request_error"), code=code)


def without_paths(text: str) -> str:
    """The text with every file path in it replaced by <path>."""
    return PATH.sub("<path>", text)


def engine_error(exc: BaseException) -> ApiError:
    """An error the engine (or the worker) raised, as the client sees it."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, Cancelled):
        return for_status(503, "the request was cancelled", "cancelled")
    if isinstance(exc, EngineBusyError):
        return for_status(429, without_paths(str(exc)), "engine_busy")
    if isinstance(exc, InsufficientMemoryError | MemoryError):
        return for_status(503, f"out of memory: {without_paths(str(exc))}", "out_of_memory")
    if isinstance(exc, UnicodeError):
        return for_status(400, "the request holds text that is not valid Unicode", "invalid_prompt")
    if isinstance(exc, ContextOverflowError | PositionsUnsupportedError | SettingsError | ValueError):
        return for_status(400, without_paths(str(exc)), "invalid_prompt")
    log.error("the engine failed", exc_info=exc)
    return for_status(500, "the engine failed; the server's log has the details", "engine_error")
