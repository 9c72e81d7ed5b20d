"""SpecPrefill needs the draft and the target to share one tokenizer: compare their vocabularies."""

from __future__ import annotations

from pathlib import Path

from engine.core.errors import ModelError
from engine.draft.vocab import hf_vocab_fingerprint
from engine.llama.native import LlamaModel
from engine.llama.vocab import gguf_vocab_fingerprint, llama_vocab_fingerprint


def draft_vocab_fingerprint(draft_path: Path) -> str:
    """A GGUF draft is read with llama.cpp (vocab only); a model folder with its tokenizer."""
    draft_path = Path(draft_path)
    return hf_vocab_fingerprint(draft_path) if draft_path.is_dir() else gguf_vocab_fingerprint(draft_path)


def require_shared_vocab(target: LlamaModel, target_name: str, draft_path: Path, draft_name: str) -> None:
    if llama_vocab_fingerprint(target) != draft_vocab_fingerprint(draft_path):
        raise ModelError(f"the draft ({draft_name}) and the target ({target_name}) use different vocabularies; "
                         "pick a draft from the target's model family")
