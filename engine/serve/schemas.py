"""The OpenAI chat completions API's request and response bodies, as pydantic models.

A request is validated from its raw bytes (pydantic-core's JSON parser bounds nesting), and a
field this server does not know is refused (extra="forbid"), never silently ignored. Fields it
knows but can only take at their "off" value (tools, logprobs, n...) are checked in
engine.serve.body, which turns the request into the engine's settings.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

MAX_STOPS = 4
MAX_STOP_CHARS = 1000  # one stop sequence: longer ones are refused (a stop is a few characters)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContentPart(BaseModel):
    """One part of a message's content: only text parts are answered (engine.serve.conversation)."""

    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """A message; fields beyond these (a client's own bookkeeping) are ignored, tool calls refused."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[Any] | None = None
    function_call: Any = None


class StreamOptions(Strict):
    include_usage: bool = False


class SpecPrefillOptions(Strict):
    """This server's extension: {"mode": auto|spec|baseline, "keep": a fraction or "auto"}."""

    mode: Literal["auto", "spec", "baseline"] | None = None
    keep: float | Literal["auto"] | None = None


class ChatCompletionRequest(Strict):
    model: str = Field(min_length=1)
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    # sampling: llama.cpp's sampler chain (engine.llama.sampler); greedy when absent
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repeat_penalty: float | None = None
    # accepted at their "off" value only (engine.serve.body.OFF_VALUES)
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    logit_bias: dict[str, float] | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    store: bool | None = None
    # accepted, not used
    user: str | None = None
    metadata: dict[str, str] | None = None
    specprefill: SpecPrefillOptions | None = None


# -- responses ----------------------------------------------------------------------------------
class Selection(BaseModel):
    prefill_tokens: int
    keep_reason: str
    bypassed: bool
    bypass_reason: str
    fit: str
    seen_fraction: float
    draft_s: float
    select_s: float
    draft_peak_bytes: int  # the draft's memory at its peak while scoring (0: it did not run)


class SpecPrefillUsage(BaseModel):
    """How the answer was prefilled, and how fast its first token came."""

    ttft_s: float
    mode: Literal["spec", "baseline"]
    kept_fraction: float
    positions: str
    served_by: str
    selection: Selection


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    specprefill: SpecPrefillUsage


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: None = None
    finish_reason: str


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler):
        """{"content": "..."} as OpenAI sends it, not {"role": null, "content": "..."}."""
        return {k: v for k, v in handler(self).items() if v is not None}


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    logprobs: None = None
    finish_reason: str | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None

    @model_serializer(mode="wrap")
    def _usage_when_sent(self, handler):
        """`usage` is in the last chunk only (stream_options.include_usage), absent from the others."""
        data = handler(self)
        if data.get("usage") is None:
            data.pop("usage", None)
        return data


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "specprefill"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Health(BaseModel):
    status: Literal["ok", "restarting", "shutting_down"]
    model: str
    running: int
    waiting: int
    capacity: int
    restarts: int
