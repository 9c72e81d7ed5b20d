"""Build the chat prompt (system line, document, question last) and tokenize it in three parts.

The document is tokenized without special-token parsing, so a document that contains
"<|im_start|>" cannot inject chat turns, and the token span of the document is exact:
everything after it (question, end of turn, assistant header) is the protected tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core.errors import SpecPrefillError
from engine.llama.native import LlamaModel

_DOC_SLOT = "\u27e6SPECPREFILL_DOCUMENT_SLOT\u27e7"  # a marker no template rewrites


@dataclass(frozen=True)
class PromptParts:
    prefix: str  # template text before the document (system turn, user header)
    document: str
    suffix: str  # question, end of turn, assistant header

    @property
    def text(self) -> str:
        return self.prefix + self.document + self.suffix

    @property
    def doc_char_span(self) -> tuple[int, int]:
        return len(self.prefix), len(self.prefix) + len(self.document)


@dataclass(frozen=True)
class PreparedPrompt:
    parts: PromptParts
    tokens: np.ndarray  # int32
    doc_token_span: tuple[int, int]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    @property
    def tail_start(self) -> int:
        """First token after the document: the question and the assistant header follow."""
        return self.doc_token_span[1]


def render_parts(model: LlamaModel, document: str, question: str, system_prompt: str) -> PromptParts:
    user = f"{_DOC_SLOT}\n\n{question.strip()}"
    rendered = model.apply_chat_template([("system", system_prompt), ("user", user)])
    prefix, sep, suffix = rendered.partition(_DOC_SLOT)
    if not sep:
        raise ValueError("the chat template dropped the document slot")
    return PromptParts(prefix=prefix, document=document, suffix=suffix)


def tokenize_parts(model: LlamaModel, parts: PromptParts) -> PreparedPrompt:
    head = model.tokenize(parts.prefix, parse_special=True)
    doc = model.tokenize(parts.document, parse_special=False)
    tail = model.tokenize(parts.suffix, parse_special=True)
    tokens = np.array(head + doc + tail, dtype=np.int32)
    return PreparedPrompt(parts=parts, tokens=tokens, doc_token_span=(len(head), len(head) + len(doc)))


def token_char_offsets(model: LlamaModel, prompt: PreparedPrompt) -> list[int]:
    """Char offset in the prompt text where each token starts (for the kept-token view)."""
    text = prompt.parts.text
    byte_len = np.fromiter((len(ch.encode("utf-8")) for ch in text), dtype=np.int64, count=len(text))
    char_at_byte = np.repeat(np.arange(len(text), dtype=np.int64), byte_len)
    piece_len = np.fromiter((len(model.token_piece(int(t))) for t in prompt.tokens), dtype=np.int64,
                            count=prompt.n_tokens)
    starts = np.concatenate([[0], np.cumsum(piece_len)[:-1]])
    starts = np.minimum(starts, max(len(char_at_byte) - 1, 0))
    return char_at_byte[starts].tolist() if len(char_at_byte) else [0] * prompt.n_tokens


def repeated_tokens(model: LlamaModel, text: str, n_tokens: int, what: str) -> list[int]:
    """The first n_tokens of the text's tokens, the text repeating when it is shorter.

    Benchmarks and calibration time real text at any length this way.
    """
    tokens = model.tokenize(text, parse_special=False)
    if not tokens:
        raise SpecPrefillError(f"the {what} document has no text")
    return (tokens * (n_tokens // len(tokens) + 1))[:n_tokens]
