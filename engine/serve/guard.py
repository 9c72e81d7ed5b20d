"""Who may use the server.

With an API key, every route but /health needs `Authorization: Bearer KEY` (compared in constant
time). Without one the server listens on loopback only (engine.cli.serve refuses anything else),
and a web page open in the user's browser must not be able to use it: so only requests whose Host
is a loopback name, with no Origin or a loopback one, are served, and a request with a body must
say `Content-Type: application/json` (a page can send text/plain to any address without asking,
but not JSON). That shuts out cross-site requests and DNS rebinding alike.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from fastapi import Request

from engine.api import is_loopback
from engine.serve.errors import ApiError, for_status


def key_matches(header: str | None, api_key: str) -> bool:
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), api_key.encode())


def host_name(authority: str) -> str:
    """The host of a Host header or an origin's authority: "[::1]:8080" -> "::1", "localhost:80" -> "localhost"."""
    try:
        return urlsplit(f"//{authority}").hostname or ""
    except ValueError:
        return ""


def loopback_origin(origin: str) -> bool:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")


def is_json(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


def check_local_request(request: Request) -> None:
    """Without a key: a loopback Host, no foreign Origin, and JSON bodies only."""
    if not is_loopback(host_name(request.headers.get("host", ""))):
        raise for_status(
            403, "this server answers requests addressed to a loopback host only", "forbidden_host"
        )
    origin = request.headers.get("origin")
    if origin is not None and not loopback_origin(origin):
        raise for_status(403, "requests from web pages of other sites are refused", "forbidden_origin")
    if request.method in ("POST", "PUT", "PATCH") and not is_json(request.headers.get("content-type")):
        raise for_status(415, "the request body must be sent as Content-Type: application/json", "not_json")


def check_key(request: Request, api_key: str) -> None:
    if not key_matches(request.headers.get("authorization"), api_key):
        raise ApiError(
            401,
            "a valid API key is required: send `Authorization: Bearer KEY`",
            type="authentication_error",
            code="invalid_api_key",
        )


def admit(request: Request, api_key: str | None, needs_key: bool = True) -> None:
    """Refuse the request (an ApiError) unless the server's policy lets it through."""
    if api_key is None:
        check_local_request(request)
    elif needs_key:
        check_key(request, api_key)
