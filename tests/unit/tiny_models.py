"""Tiny random models for fast tests: a Qwen2 config in transformers."""

from __future__ import annotations

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

import engine.draft.scorer  # noqa: F401  (registers the capturing attention)


def tiny_qwen2(attn_implementation: str = "specprefill", seed: int = 0, vocab: int = 96) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        attn_implementation=attn_implementation,
    )
    model = Qwen2ForCausalLM(config).eval()
    # Sharpen attention so rows differ clearly between tokens.
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(4.0)
    return model
