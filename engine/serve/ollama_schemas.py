"""Ollama's API (its published api.md), request and response bodies as pydantic models.

Requests name every field Ollama's document lists; a field beyond them is refused. Which are
honoured, which are accepted without effect (how a model is run: threads, GPU layers, how long it
stays loaded) and which are refused unless off is decided in engine.serve.ollama_body."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.serve.schemas import SpecPrefillOptions, SpecPrefillUsage


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Options(Strict):
    """A request's `options` (the Modelfile's parameters)."""

    # honoured
    num_predict: int | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    seed: int | None = None
    repeat_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop: list[str] | None = None
    # accepted without effect: how the model runs, not what it answers
    num_ctx: int | None = None
    num_batch: int | None = None
    num_gpu: int | None = None
    main_gpu: int | None = None
    num_thread: int | None = None
    num_keep: int | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None
    numa: bool | None = None
    low_vram: bool | None = None
    vocab_only: bool | None = None
    logits_all: bool | None = None
    embedding_only: bool | None = None
    # refused unless at their "off" value
    typical_p: float | None = None
    repeat_last_n: int | None = None
    penalize_newline: bool | None = None
    mirostat: int | None = None
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    tfs_z: float | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    content: str = ""
    images: list[str] | None = None
    tool_calls: list[Any] | None = None
    thinking: str | None = None
    tool_name: str | None = None


class ChatRequest(Strict):
    model: str = Field(min_length=1)
    messages: list[Message] = Field(default_factory=list)
    stream: bool = True
    options: Options | None = None
    format: str | dict[str, Any] | None = None
    tools: list[Any] | None = None
    think: bool | str | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    keep_alive: str | int | float | None = None
    specprefill: SpecPrefillOptions | None = None


class GenerateRequest(Strict):
    model: str = Field(min_length=1)
    prompt: str = ""
    system: str | None = None
    stream: bool = True
    options: Options | None = None
    suffix: str | None = None
    images: list[str] | None = None
    format: str | dict[str, Any] | None = None
    template: str | None = None
    raw: bool | None = None
    context: list[int] | None = None
    think: bool | str | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    width: int | None = None  # image generation's
    height: int | None = None
    steps: int | None = None
    keep_alive: str | int | float | None = None
    specprefill: SpecPrefillOptions | None = None


class ShowRequest(Strict):
    model: str | None = None
    name: str | None = None  # the field's older name
    verbose: bool | None = None


# -- responses ----------------------------------------------------------------------------------
class Details(BaseModel):
    parent_model: str = ""
    format: str = "gguf"
    family: str
    families: list[str]
    parameter_size: str
    quantization_level: str


class ModelEntry(BaseModel):
    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: Details


class RunningModel(ModelEntry):
    expires_at: str
    size_vram: int = 0


class Tags(BaseModel):
    models: list[ModelEntry]


class Running(BaseModel):
    models: list[RunningModel]


class Show(BaseModel):
    modelfile: str = ""
    parameters: str = ""
    template: str = ""
    license: str = ""
    details: Details
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str


class Version(BaseModel):
    version: str


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Reply(BaseModel):
    """One line of an answer (`done` false while it streams), or the whole of it: the last line has the
    counts and durations (nanoseconds), and how SpecPrefill served it."""

    model: str
    created_at: str
    message: AssistantMessage | None = None  # /api/chat
    response: str | None = None  # /api/generate
    done: bool
    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None
    specprefill: SpecPrefillUsage | None = None
