"""SpecPrefill scores the target's prompt tokens with the draft, so both must read a token id as the
same token. The check says which of three cases applies:

- identical: the same tokens in the same order;
- compatible: every token both have sits at the same id; where they differ, or past the shorter
  one's end, there are only padding or added special tokens (a GGUF pads Qwen's 151,665 tokens
  to 151,936 with [PAD...] tokens, which its tokenizer folder does not list);
- different: an ordinary token differs, or a token sits at another id (another model family).

The first two share token ids: the draft selects the target's own tokens. A different vocabulary
loads too when the draft is a GGUF: the draft reads the prompt in its own tokens, and its
selection reaches the target through character spans (engine.pipeline.span_selection).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import llama_cpp.llama_cpp as L
from gguf import TokenType

from engine.core.errors import ModelError
from engine.llama.native import LlamaModel
from engine.models.gguf_header import GGUFHeaderError, read_header

log = logging.getLogger(__name__)

Verdict = Literal["identical", "compatible", "different"]
TOKENS_KEY, TYPES_KEY = "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"
EXTRA_TYPES = {
    int(TokenType.UNKNOWN),
    int(TokenType.CONTROL),
    int(TokenType.USER_DEFINED),
    int(TokenType.UNUSED),
}
EXTRA_ATTRS = (
    L.LLAMA_TOKEN_ATTR_UNKNOWN
    | L.LLAMA_TOKEN_ATTR_UNUSED
    | L.LLAMA_TOKEN_ATTR_CONTROL
    | L.LLAMA_TOKEN_ATTR_USER_DEFINED
)
# Padding and reserved tokens by their text, for vocabularies that do not type them.
PADDING = re.compile(
    r"\[PAD\d*\]|<pad>|<\|PAD_TOKEN\|>|<unused\d+>|<\|reserved_special_token_\d+\|>|<extra_id_\d+>"
)


@dataclass(frozen=True)
class Vocab:
    tokens: tuple[str, ...]  # the token strings, by id
    extra: frozenset[int]  # ids of padding and special (control, added, unused) tokens


@dataclass(frozen=True)
class VocabMatch:
    verdict: Verdict
    target_size: int
    draft_size: int
    reason: str  # what was found, in words

    def describe(self) -> str:
        return f"{self.verdict}: {self.reason}"


def vocab_of(tokens: list[str], extra_ids: set[int]) -> Vocab:
    """A vocabulary from its strings and the ids typed special; padding is recognised by its text too."""
    padding = {i for i, token in enumerate(tokens) if not token or PADDING.fullmatch(token)}
    return Vocab(tuple(tokens), frozenset(extra_ids | padding))


def _moved_token(a: Vocab, b: Vocab, ids: list[int], names: tuple[str, str]) -> str | None:
    """The first token at one of `ids` in `a` that `b` has at another id, in words (`names`: a's, b's)."""
    index = {}
    for i, token in enumerate(b.tokens):
        index.setdefault(token, i)
    for i in ids:
        token = a.tokens[i] if i < len(a.tokens) else ""
        j = index.get(token)
        if token and j is not None and j != i and not (j < len(a.tokens) and a.tokens[j] == token):
            return f"{token!r} is token {i:,} in the {names[0]} and {j:,} in the {names[1]}"
    return None


def _first_ordinary_difference(target: Vocab, draft: Vocab) -> str | None:
    shared = min(len(target.tokens), len(draft.tokens))
    for i in range(shared):
        t, d = target.tokens[i], draft.tokens[i]
        if t != d and not (i in target.extra and i in draft.extra):
            return f"token {i:,} is {t!r} in the target and {d!r} in the draft"
    longer, name = (target, "target") if len(target.tokens) > shared else (draft, "draft")
    ordinary = next((i for i in range(shared, len(longer.tokens)) if i not in longer.extra), None)
    if ordinary is not None:
        return f"the {name} goes on with ordinary token {ordinary:,} ({longer.tokens[ordinary]!r})"
    return None


def _compatible_reason(target: Vocab, draft: Vocab, differing: int) -> str:
    shared = min(len(target.tokens), len(draft.tokens))
    parts = [f"the same {shared - differing:,} tokens at the same ids"]
    if differing:
        parts.append(f"{differing:,} special tokens differ")
    longer = "target" if len(target.tokens) > len(draft.tokens) else "draft"
    extra = abs(len(target.tokens) - len(draft.tokens))
    if extra:
        parts.append(f"the {longer} adds {extra:,} padding or special tokens")
    return "; ".join(parts)


def compare_vocabs(target: Vocab, draft: Vocab) -> VocabMatch:
    sizes = (len(target.tokens), len(draft.tokens))
    if target.tokens == draft.tokens:
        return VocabMatch("identical", *sizes, f"the same {sizes[0]:,} tokens in the same order")
    difference = _first_ordinary_difference(target, draft)
    if difference is not None:
        return VocabMatch("different", *sizes, difference)
    shared = min(sizes)
    differing = [i for i in range(shared) if target.tokens[i] != draft.tokens[i]]
    tail = list(range(shared, max(sizes)))
    ids = differing + tail
    moved = _moved_token(target, draft, ids, ("target", "draft")) or _moved_token(
        draft, target, ids, ("draft", "target")
    )
    if moved is not None:
        return VocabMatch("different", *sizes, moved)
    return VocabMatch("compatible", *sizes, _compatible_reason(target, draft, len(differing)))


def llama_vocab(model: LlamaModel) -> Vocab:
    """A loaded llama.cpp model's vocabulary (its token texts and attributes)."""
    tokens = [model.token_text(t).decode("utf-8", "replace") for t in range(model.n_vocab)]
    extra = {t for t in range(model.n_vocab) if L.llama_vocab_get_attr(model.vocab, t) & EXTRA_ATTRS}
    return vocab_of(tokens, extra)


def gguf_vocab(path: Path) -> Vocab:
    """A GGUF's vocabulary read from its header, without llama.cpp and without the weights."""
    try:
        header = read_header(path, (TOKENS_KEY, TYPES_KEY))
    except (OSError, GGUFHeaderError) as exc:
        raise ModelError(f"could not load the vocabulary of {Path(path).name}: {exc}") from exc
    tokens = header.metadata.get(TOKENS_KEY)
    if not isinstance(tokens, list):
        raise ModelError(f"{Path(path).name} has no tokenizer vocabulary")
    types = header.metadata.get(TYPES_KEY) or []
    return vocab_of(tokens, {i for i, kind in enumerate(types) if kind in EXTRA_TYPES})


def hf_vocab(model_dir: Path) -> Vocab:
    """A transformers folder's vocabulary: its tokens by id, its added and special tokens as extra."""
    from transformers import AutoTokenizer  # lazy: transformers takes seconds to import

    try:
        tok = AutoTokenizer.from_pretrained(str(model_dir))
    except Exception as exc:
        raise ModelError(f"could not read the draft's tokenizer in {model_dir}: {exc}") from exc
    tokens = [token or "" for token in tok.convert_ids_to_tokens(list(range(len(tok))))]
    return vocab_of(tokens, set(tok.added_tokens_decoder) | set(tok.all_special_ids))


def file_vocab(path: Path) -> Vocab:
    """A GGUF's vocabulary, or a model folder's (a draft may be either)."""
    path = Path(path)
    return hf_vocab(path) if path.is_dir() else gguf_vocab(path)


def compare_files(target_path: Path, draft_path: Path) -> VocabMatch:
    """The verdict for two models on disk, neither loaded (what `doctor` reports)."""
    return compare_vocabs(file_vocab(target_path), file_vocab(draft_path))


def require_shared_vocab(
    target: LlamaModel, target_name: str, draft_path: Path, draft_name: str
) -> VocabMatch:
    """The verdict for the loaded target and the draft on disk; ModelError when they differ."""
    match = compare_vocabs(llama_vocab(target), file_vocab(draft_path))
    if match.verdict == "different":
        raise ModelError(
            f"the draft ({draft_name}) and the target ({target_name}) use different vocabularies "
            f"({match.reason}); pick a draft from the target's model family"
        )
    log.info("vocabularies %s", match.describe())
    return match


def draft_vocab_for_spans(
    target: LlamaModel, target_name: str, draft_path: Path, draft_name: str
) -> LlamaModel | None:
    """None when the draft selects the target's tokens (identical or compatible vocabularies); else
    the draft's own vocabulary (a vocab-only llama.cpp model), opened for the span path. A draft
    folder of another vocabulary is refused: only a GGUF's tokenizer gives exact byte pieces here."""
    match = compare_vocabs(llama_vocab(target), file_vocab(draft_path))
    log.info("vocabularies %s", match.describe())
    if match.verdict != "different":
        return None
    if Path(draft_path).is_dir():
        raise ModelError(
            f"the draft ({draft_name}) and the target ({target_name}) use different vocabularies "
            f"({match.reason}); a draft of another family must be a GGUF file"
        )
    log.info("the draft selects through character spans: %s", match.reason)
    return LlamaModel(Path(draft_path), vocab_only=True)
