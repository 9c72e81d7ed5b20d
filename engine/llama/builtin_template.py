"""A chat template for a GGUF that ships none (base models such as Gemma 3 270M): llama.cpp's
built-in template of the model's family, named by its architecture, else ChatML. The family's
own turn markers are what its tokenizer knows as special tokens, so they stay single tokens."""

from __future__ import annotations

import ctypes

import llama_cpp.llama_cpp as L

# Architecture prefix -> the name of llama.cpp's built-in template (llama_chat_apply_template takes either).
FAMILY_TEMPLATES = (("gemma", "gemma"), ("llama", "llama3"), ("phi3", "phi3"), ("mistral", "mistral-v7"))
DEFAULT_TEMPLATE = "chatml"


def architecture(model_ptr) -> str:
    """The GGUF's general.architecture ("gemma3", "qwen2"), "" when it has none."""
    buf = ctypes.create_string_buffer(128)
    n = L.llama_model_meta_val_str(model_ptr, b"general.architecture", buf, len(buf))
    return buf.value.decode("utf-8", "replace") if n > 0 else ""


def builtin_template_name(arch: str) -> str:
    """The built-in template for an architecture without a template of its own."""
    return next((name for prefix, name in FAMILY_TEMPLATES if arch.startswith(prefix)), DEFAULT_TEMPLATE)
