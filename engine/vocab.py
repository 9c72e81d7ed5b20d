"""Vocabulary fingerprints: SpecPrefill needs the draft and the target to share one tokenizer."""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.errors import ModelError
from engine.target.native import LlamaModel


def llama_vocab_fingerprint(model: LlamaModel) -> str:
    digest = hashlib.sha256()
    for token in range(model.n_vocab):
        digest.update(model.token_text(token) + b"\x00")
    return digest.hexdigest()


def draft_vocab_fingerprint(draft_path: Path) -> str:
    """A GGUF draft is read with llama.cpp (vocab only); a model directory with its tokenizer."""
    draft_path = Path(draft_path)
    if draft_path.is_dir():
        return _hf_vocab_fingerprint(draft_path)
    vocab_model = LlamaModel(draft_path, vocab_only=True)
    try:
        return llama_vocab_fingerprint(vocab_model)
    finally:
        vocab_model.close()


def _hf_vocab_fingerprint(model_dir: Path) -> str:
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
    except Exception as exc:
        raise ModelError(f"could not read the draft's tokenizer in {model_dir}: {exc}") from exc
    digest = hashlib.sha256()
    vocab_size = len(tok)
    for token in tok.convert_ids_to_tokens(list(range(vocab_size))):
        digest.update((token or "").encode("utf-8") + b"\x00")
    return digest.hexdigest()


def require_shared_vocab(target: LlamaModel, target_name: str, draft_path: Path, draft_name: str) -> None:
    if llama_vocab_fingerprint(target) != draft_vocab_fingerprint(draft_path):
        raise ModelError(f"the draft ({draft_name}) and the target ({target_name}) use different vocabularies; "
                         "pick a draft from the target's model family")
