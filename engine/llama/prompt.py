"""Build the chat prompt (system line, document, question last) and tokenize it in parts.

Special tokens are parsed only in the template's own text. The document and the question
are tokenized without, so a document or a question that contains "<|im_start|>" cannot
inject chat turns. The token span of the document is exact: everything after it (question,
end of turn, assistant header) is the protected tail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.core.errors import SpecPrefillError
from engine.core.settings import DRAFT_QUESTION_ROWS_MAX
from engine.llama.native import LlamaModel

_DOC_SLOT = "\u27e6SPECPREFILL_DOCUMENT_SLOT\u27e7"  # markers no template rewrites
_QUESTION_SLOT = "\u27e6SPECPREFILL_QUESTION_SLOT\u27e7"


@dataclass(frozen=True)
class PromptParts:
    prefix: str  # template text before the document (system turn, user header)
    document: str
    gap: str  # template text between the document and the question
    question: str
    tail: str  # template text after the question: end of turn, assistant header

    @property
    def suffix(self) -> str:
        """Everything after the document: the question between the template's own text."""
        return self.gap + self.question + self.tail

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

    @property
    def question_rows(self) -> int:
        """The tokens after the document but the last (question, end of turn, assistant header), at most
        DRAFT_QUESTION_ROWS_MAX: the queries that score the prompt beside the look-ahead's, whose first is
        the last token's. A question that holds a whole document scores with its last rows only, so the
        draft's memory for them stays bounded (engine.draft.memory)."""
        return min(max(self.n_tokens - 1 - self.tail_start, 0), DRAFT_QUESTION_ROWS_MAX)


def render_parts(model: LlamaModel, document: str, question: str, system_prompt: str) -> PromptParts:
    rendered = model.apply_chat_template(
        [("system", system_prompt), ("user", f"{_DOC_SLOT}\n\n{_QUESTION_SLOT}")]
    )
    prefix, doc_sep, after_doc = rendered.partition(_DOC_SLOT)
    gap, question_sep, tail = after_doc.partition(_QUESTION_SLOT)
    if not (doc_sep and question_sep):
        raise ValueError("the chat template dropped the document or the question slot")
    return PromptParts(prefix=prefix, document=document, gap=gap, question=question.strip(), tail=tail)


def tokenize_parts(model: LlamaModel, parts: PromptParts) -> PreparedPrompt:
    head = model.tokenize(parts.prefix, parse_special=True)
    doc = model.tokenize(parts.document, parse_special=False)
    tail = (
        model.tokenize(parts.gap, parse_special=True)
        + model.tokenize(parts.question, parse_special=False)
        + model.tokenize(parts.tail, parse_special=True)
    )
    tokens = np.array(head + doc + tail, dtype=np.int32)
    return PreparedPrompt(parts=parts, tokens=tokens, doc_token_span=(len(head), len(head) + len(doc)))


def token_char_offsets(model: LlamaModel, prompt: PreparedPrompt) -> list[int]:
    """Char offset in the prompt text where each token starts (for the kept-token view)."""
    text = prompt.parts.text
    byte_len = np.fromiter((len(ch.encode("utf-8")) for ch in text), dtype=np.int64, count=len(text))
    char_at_byte = np.repeat(np.arange(len(text), dtype=np.int64), byte_len)
    piece_len = np.fromiter(
        (len(model.token_piece(int(t))) for t in prompt.tokens), dtype=np.int64, count=prompt.n_tokens
    )
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
