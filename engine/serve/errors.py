"""OpenAI-style error objects: {"error": {"message", "type", "param", "code"}} with an HTTP status."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the client gets as an OpenAI error object, with its HTTP status."""

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
        return error_body(self.message, self.type, self.param, self.code)


def error_body(
    message: str, type: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad_request(message: str, param: str | None = None, code: str | None = "invalid_value") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def unsupported(param: str, message: str) -> ApiError:
    """A field this server cannot honour: refused, never silently ignored."""
    return ApiError(400, message, param=param, code="unsupported_parameter")


# The error type OpenAI's clients expect for each status this server answers with.
STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


def for_status(status: int, message: str, code: str | None = None) -> ApiError:
    return ApiError(status, message, type=STATUS_TYPES.get(status, "invalid_request_error"), code=code)
