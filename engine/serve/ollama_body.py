"""An Ollama request (engine.serve.ollama_schemas) as the engine runs it: the same conversation rule,
settings and stops as an OpenAI request (engine.serve.body)."""

from __future__ import annotations

from typing import Any

from engine.api import RunSettings
from engine.serve.body import ChatRequest, settings_for, stops_of
from engine.serve.conversation import Message as TextMessage
from engine.serve.conversation import conversation_of, parse_messages
from engine.serve.errors import ApiError, unsupported
from engine.serve.ollama_schemas import ChatRequest as OllamaChat
from engine.serve.ollama_schemas import GenerateRequest, Options

LATEST = ":latest"
# options honoured, by the engine setting each sets
HONOURED_OPTIONS = {
    "num_predict": "max_new_tokens",
    "temperature": "temperature",
    "top_k": "top_k",
    "top_p": "top_p",
    "min_p": "min_p",
    "seed": "seed",
    "repeat_penalty": "repeat_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}
# options refused unless at the value that means "off" (Ollama's defaults)
OFF_OPTIONS: dict[str, tuple[Any, ...]] = {
    "typical_p": (None, 1, 1.0),
    "repeat_last_n": (None, 64),
    "penalize_newline": (None, False),
    "mirostat": (None, 0),
    "mirostat_tau": (None, 5, 5.0),
    "mirostat_eta": (None, 0.1),
    "tfs_z": (None, 1, 1.0),
}
# request fields refused unless absent or off
OFF_FIELDS: dict[str, tuple[Any, ...]] = {
    "format": (None, ""),
    "tools": (None, []),
    "think": (None, False),
    "images": (None, []),
    "suffix": (None, ""),
    "template": (None, ""),
    "raw": (None, False),
    "context": (None, []),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "width": (None,),
    "height": (None,),
    "steps": (None,),
}


def served_name(model_id: str) -> str:
    """The model's name in Ollama's lists: Ollama names carry a tag."""
    return model_id + LATEST


def check_ollama_model(name: str, model_id: str) -> None:
    if name not in (model_id, served_name(model_id)):
        raise ApiError(404, f"model {name!r} not found; this server serves {served_name(model_id)!r}")


def check_off(body: Any, fields: dict[str, tuple[Any, ...]], prefix: str = "") -> None:
    for name, allowed in fields.items():
        if getattr(body, name, None) not in allowed:
            raise unsupported(prefix + name, f"{prefix}{name} is not supported by this server")


def overrides_of(options: Options | None, defaults: RunSettings) -> tuple[dict[str, Any], dict[str, str]]:
    """The engine settings a request's options set, and the option each came from."""
    overrides: dict[str, Any] = {}
    names: dict[str, str] = {}
    if options is None:
        return overrides, names
    check_off(options, OFF_OPTIONS, "options.")
    for option, setting in HONOURED_OPTIONS.items():
        value = getattr(options, option)
        if value is None:
            continue
        if option == "num_predict" and value < 0:  # -1: no limit, -2: fill the context: the server's own
            value = defaults.max_new_tokens
        overrides[setting], names[setting] = value, f"options.{option}"
    return overrides, names


def engine_request(
    messages: list[TextMessage], body: OllamaChat | GenerateRequest, defaults: RunSettings, default_mode: str
) -> ChatRequest:
    conversation = conversation_of(messages)
    overrides, names = overrides_of(body.options, defaults)
    if body.specprefill is not None and body.specprefill.keep is not None:
        overrides["keep"], names["keep"] = body.specprefill.keep, "specprefill.keep"
    if conversation.system_prompt is not None:
        overrides["system_prompt"] = conversation.system_prompt
    mode = body.specprefill.mode if body.specprefill is not None and body.specprefill.mode else default_mode
    stops = stops_of(body.options.stop if body.options is not None else None)
    return ChatRequest(conversation, mode, settings_for(defaults, overrides, names), body.stream, True, stops)


def chat_request(body: OllamaChat, model_id: str, defaults: RunSettings, default_mode: str) -> ChatRequest:
    """POST /api/chat as the engine runs it."""
    check_ollama_model(body.model, model_id)
    check_off(body, OFF_FIELDS)
    for i, message in enumerate(body.messages):
        check_off(message, {"images": (None, []), "tool_calls": (None, [])}, f"messages[{i}].")
    raw = [{"role": m.role, "content": m.content} for m in body.messages]
    return engine_request(parse_messages(raw), body, defaults, default_mode)


def generate_request(
    body: GenerateRequest, model_id: str, defaults: RunSettings, default_mode: str
) -> ChatRequest:
    """POST /api/generate as the engine runs it: the prompt is one user message, `system` the system turn."""
    check_ollama_model(body.model, model_id)
    check_off(body, OFF_FIELDS)
    raw = [{"role": "system", "content": body.system}] if body.system else []
    raw.append({"role": "user", "content": body.prompt})
    return engine_request(parse_messages(raw), body, defaults, default_mode)
