"""The vocabulary fingerprint of a draft kept as a transformers model folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.core.errors import ModelError


def hf_vocab_fingerprint(model_dir: Path) -> str:
    """Hashes the token strings in id order, as engine.llama.vocab does for a GGUF."""
    from transformers import AutoTokenizer  # lazy: transformers takes seconds to import

    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
    except Exception as exc:
        raise ModelError(f"could not read the draft's tokenizer in {model_dir}: {exc}") from exc
    digest = hashlib.sha256()
    for token in tok.convert_ids_to_tokens(list(range(len(tok)))):
        digest.update((token or "").encode("utf-8") + b"\x00")
    return digest.hexdigest()
