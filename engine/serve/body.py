"""A chat completion request's body: read within the size limit, parsed, and every field either
honoured or refused with a 400 that says why (the engine decodes greedily, so sampling fields
other than their greedy values are refused, never ignored)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from engine.api import AUTO_KEEP, SESSION_MODES, RunSettings, SettingsError
from engine.serve.conversation import Conversation, conversation_of, parse_messages
from engine.serve.errors import ApiError, bad_request, unsupported

MAX_STOPS = 4
# Fields accepted only at the value that means "off" (or greedy decoding): anything else is refused.
NEUTRAL_VALUES: dict[str, tuple[Any, ...]] = {
    "temperature": (None, 0, 0.0),
    "top_p": (None, 1, 1.0),
    "n": (None, 1),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "parallel_tool_calls": (None, False, True),
    "response_format": (None, {"type": "text"}),
}
WHY_REFUSED = {
    "temperature": "this server decodes greedily: temperature must be 0 or absent",
    "top_p": "this server decodes greedily: top_p must be 1 or absent",
    "n": "this server returns one choice: n must be 1 or absent",
}
HONOURED = {
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "stream",
    "stream_options",
    "user",
    "specprefill",
}


@dataclass(frozen=True)
class ChatRequest:
    conversation: Conversation
    mode: str  # auto | spec | baseline (the engine's session modes)
    settings: RunSettings
    stream: bool
    include_usage: bool
    stops: tuple[str, ...]


async def read_limited(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The body, refused with 413 as soon as it passes `limit` bytes (chunked bodies too)."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise ApiError(
                413, f"the request body is over the limit of {limit:,} bytes", code="body_too_large"
            )
    return bytes(body)


def parse_json(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the body is not valid JSON: {exc}", None, "invalid_json") from None
    if not isinstance(data, dict):
        raise bad_request("the body must be a JSON object", None, "invalid_json")
    return data


def check_fields(data: dict[str, Any]) -> None:
    for name, value in data.items():
        if name in HONOURED:
            continue
        if name not in NEUTRAL_VALUES:
            raise unsupported(name, f"the field {name!r} is not supported by this server")
        if value not in NEUTRAL_VALUES[name]:
            raise unsupported(name, WHY_REFUSED.get(name, f"{name} is not supported (got {value!r})"))


def max_tokens_of(data: dict[str, Any]) -> int | None:
    values = {k: data[k] for k in ("max_completion_tokens", "max_tokens") if data.get(k) is not None}
    if len(set(map(repr, values.values()))) > 1:
        raise bad_request("max_tokens and max_completion_tokens differ; give one", "max_tokens")
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad_request(f"{name} must be a whole number of at least 1", name)
        return value
    return None


def stops_of(value: Any) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value if value is not None else []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise bad_request("stop must be a non-empty string or a list of them", "stop")
    if len(stops) > MAX_STOPS:
        raise bad_request(f"stop takes at most {MAX_STOPS} sequences", "stop")
    return tuple(stops)


def stream_flags(data: dict[str, Any]) -> tuple[bool, bool]:
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request("stream must be true or false", "stream")
    options = data.get("stream_options")
    if options is None:
        return stream, False
    if not stream:
        raise bad_request("stream_options is only allowed with stream: true", "stream_options")
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise unsupported("stream_options", "stream_options takes include_usage only")
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise bad_request(
            "stream_options.include_usage must be true or false", "stream_options.include_usage"
        )
    return stream, include


def spec_options(value: Any, default_mode: str) -> tuple[str, dict[str, Any]]:
    """The `specprefill` extension: {"mode": auto|spec|baseline, "keep": a fraction or "auto"}."""
    if value is None:
        return default_mode, {}
    if not isinstance(value, dict) or set(value) - {"mode", "keep"}:
        raise bad_request('specprefill must be an object with "mode" and/or "keep"', "specprefill")
    mode = value.get("mode", default_mode)
    if mode not in SESSION_MODES:
        raise bad_request(f"specprefill.mode must be one of {', '.join(SESSION_MODES)}", "specprefill.mode")
    overrides: dict[str, Any] = {}
    if "keep" in value:
        keep = value["keep"]
        if keep != AUTO_KEEP and (isinstance(keep, bool) or not isinstance(keep, (int, float))):
            raise bad_request('specprefill.keep must be a fraction in (0, 1] or "auto"', "specprefill.keep")
        overrides["keep"] = keep if keep == AUTO_KEEP else float(keep)
    return mode, overrides


def parse_chat_request(
    data: dict[str, Any], model_id: str, defaults: RunSettings, default_mode: str
) -> ChatRequest:
    """The request as the engine runs it; any field it cannot honour is a 400 (unknown model: 404)."""
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("model is required", "model", "missing_required_parameter")
    if model != model_id:
        raise ApiError(
            404,
            f"the model {model!r} does not exist; this server serves {model_id!r}",
            param="model",
            code="model_not_found",
        )
    check_fields(data)
    conversation = conversation_of(parse_messages(data.get("messages")))
    if data.get("seed") is not None and (isinstance(data["seed"], bool) or not isinstance(data["seed"], int)):
        raise bad_request("seed must be an integer", "seed")
    if data.get("user") is not None and not isinstance(data["user"], str):
        raise bad_request("user must be a string", "user")
    stream, include_usage = stream_flags(data)
    mode, overrides = spec_options(data.get("specprefill"), default_mode)
    max_tokens = max_tokens_of(data)
    if max_tokens is not None:
        overrides["max_new_tokens"] = max_tokens
    if conversation.system_prompt is not None:
        overrides["system_prompt"] = conversation.system_prompt
    try:
        settings = replace(defaults, **overrides)
    except SettingsError as exc:
        param = "specprefill.keep" if "keep" in str(exc) else "max_tokens"
        raise bad_request(str(exc), param) from None
    return ChatRequest(conversation, mode, settings, stream, include_usage, stops_of(data.get("stop")))
