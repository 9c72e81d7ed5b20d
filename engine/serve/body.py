"""A request body: read within the size limit, validated into its pydantic model, and turned into
what the engine runs. Every field is either honoured or refused with a 400 that says why; none
is silently ignored. Shared by the OpenAI and the Ollama routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from engine.api import RunSettings, SettingsError, sampling_fields
from engine.serve.conversation import Conversation, conversation_of, parse_messages
from engine.serve.errors import ApiError, bad_request, unsupported
from engine.serve.schemas import MAX_STOP_CHARS, MAX_STOPS, ChatCompletionRequest

Body = TypeVar("Body", bound=BaseModel)

# Fields accepted only at the value that means "off": anything else is refused.
OFF_VALUES: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "tools": (None, []),
    "tool_choice": (None, "none", "auto"),
    "functions": (None, []),
    "function_call": (None, "none", "auto"),
    "parallel_tool_calls": (None, False, True),
    "response_format": (None, {"type": "text"}),
    "store": (None, False),
}
WHY_REFUSED = {
    "n": "this server returns one choice: n must be 1 or absent",
    "tools": "tool calls are not supported",
    "logprobs": "log probabilities are not returned by this server",
}
# The sampling fields: a request names them as the engine's settings do (temperature, top_p, top_k,
# min_p, seed, presence_penalty, frequency_penalty, repeat_penalty).
SAMPLING_FIELDS = sampling_fields()


@dataclass(frozen=True)
class ChatRequest:
    """A request as the engine runs it, whichever API it came through."""

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


def validated(model: type[Body], raw: bytes) -> Body:
    """The body as `model`, or a 400 naming the first field at fault (pydantic-core's JSON parser
    refuses nesting deeper than its recursion limit, so no body can exhaust the stack)."""
    try:
        return model.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        raise api_error_of(exc) from None


def api_error_of(exc: ValidationError) -> ApiError:
    first = exc.errors(include_url=False, include_input=False)[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
    kind = first["type"]
    if kind.startswith("json_") or kind in ("model_type", "model_attributes_type") and not where:
        return bad_request(f"the body is not a valid JSON object: {first['msg']}", None, "invalid_json")
    if kind == "extra_forbidden":
        return unsupported(where, f"the field {where!r} is not supported by this server")
    if kind == "missing":
        return bad_request(f"{where} is required", where, "missing_required_parameter")
    return bad_request(f"{where}: {first['msg']}", where or None)


def check_off_values(body: BaseModel) -> None:
    for name, allowed in OFF_VALUES.items():
        value = getattr(body, name, None)
        if value not in allowed:
            raise unsupported(name, WHY_REFUSED.get(name, f"{name} is not supported (got {value!r})"))


def stops_of(value: str | list[str] | None) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value or []
    if not all(stops):
        raise bad_request("stop must be a non-empty string or a list of them", "stop")
    if len(stops) > MAX_STOPS:
        raise bad_request(f"stop takes at most {MAX_STOPS} sequences", "stop")
    if any(len(s) > MAX_STOP_CHARS for s in stops):
        raise bad_request(f"a stop sequence is at most {MAX_STOP_CHARS:,} characters", "stop")
    return tuple(stops)


def settings_for(
    defaults: RunSettings, overrides: dict[str, Any], param_names: dict[str, str]
) -> RunSettings:
    """The defaults with a request's overrides; a value out of range is a 400 naming the request's field
    (`param_names`: setting name -> the field the request named it by)."""
    try:
        return replace(defaults, **overrides)
    except SettingsError as exc:
        message = str(exc)
        param = next((p for name, p in param_names.items() if name in message), None)
        raise bad_request(message, param) from None


def check_model(model: str, model_id: str) -> None:
    if model != model_id:
        raise ApiError(
            404,
            f"the model {model!r} does not exist; this server serves {model_id!r}",
            param="model",
            code="model_not_found",
        )


def openai_chat_request(
    body: ChatCompletionRequest, model_id: str, defaults: RunSettings, default_mode: str
) -> ChatRequest:
    """A validated OpenAI request as the engine runs it (unknown model: 404)."""
    check_model(body.model, model_id)
    check_off_values(body)
    if body.stream_options is not None and not body.stream:
        raise bad_request("stream_options is only allowed with stream: true", "stream_options")
    if (
        None not in (body.max_tokens, body.max_completion_tokens)
        and body.max_tokens != body.max_completion_tokens
    ):
        raise bad_request("max_tokens and max_completion_tokens differ; give one", "max_tokens")
    conversation = conversation_of(parse_messages([m.model_dump() for m in body.messages]))
    overrides: dict[str, Any] = {name: getattr(body, name) for name in SAMPLING_FIELDS}
    overrides = {name: value for name, value in overrides.items() if value is not None}
    names = {name: name for name in SAMPLING_FIELDS}
    if (max_tokens := body.max_completion_tokens or body.max_tokens) is not None:
        overrides["max_new_tokens"], names["max_new_tokens"] = max_tokens, "max_tokens"
    spec = body.specprefill
    if spec is not None and spec.keep is not None:
        overrides["keep"], names["keep"] = spec.keep, "specprefill.keep"
    if conversation.system_prompt is not None:
        overrides["system_prompt"] = conversation.system_prompt
    return ChatRequest(
        conversation,
        spec.mode if spec is not None and spec.mode else default_mode,
        settings_for(defaults, overrides, names),
        body.stream,
        body.stream_options.include_usage if body.stream_options else False,
        stops_of(body.stop),
    )
