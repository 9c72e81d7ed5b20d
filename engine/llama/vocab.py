"""Vocabulary fingerprints of llama.cpp models: SpecPrefill needs the draft and the target to
share one tokenizer, and the pipeline compares these fingerprints before loading the draft."""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.llama.native import LlamaModel


def llama_vocab_fingerprint(model: LlamaModel) -> str:
    digest = hashlib.sha256()
    for token in range(model.n_vocab):
        digest.update(model.token_text(token) + b"\x00")
    return digest.hexdigest()


def gguf_vocab_fingerprint(path: Path) -> str:
    """The fingerprint of a GGUF file's vocabulary, read with llama.cpp (vocab only, no weights)."""
    vocab_model = LlamaModel(Path(path), vocab_only=True)
    try:
        return llama_vocab_fingerprint(vocab_model)
    finally:
        vocab_model.close()
