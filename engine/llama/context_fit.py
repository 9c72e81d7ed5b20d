"""Fit a prepared prompt into the target's context window: refuse with the numbers, or cut.

Cutting is explicit (RunSettings.truncate): it keeps the system turn, the head of the
document that fits, and the whole tail (question, end of turn, assistant header), and it
says how much was dropped. Without it an oversized prompt is refused, never silently cut.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, replace

import numpy as np

from engine.core.errors import ContextOverflowError
from engine.llama.native import LlamaModel
from engine.llama.prompt import PreparedPrompt


@dataclass(frozen=True)
class Truncation:
    """What a cut removed from the end of the document."""

    doc_tokens: int
    cut_tokens: int
    doc_chars: int
    cut_chars: int

    def describe(self) -> str:
        return (
            f"the document was cut to fit the context window: its last {self.cut_tokens} of "
            f"{self.doc_tokens} tokens (about {self.cut_chars:,} of {self.doc_chars:,} characters) "
            "were dropped; the question was kept"
        )


def fit_prompt(
    model: LlamaModel, prompt: PreparedPrompt, n_ctx: int, max_new_tokens: int, truncate: bool
) -> tuple[PreparedPrompt, Truncation | None]:
    """The prompt as is when it fits with room for the answer; else cut (if allowed) or refused."""
    if prompt.n_tokens + max_new_tokens <= n_ctx:
        return prompt, None
    start, end = prompt.doc_token_span
    fixed = prompt.n_tokens - (end - start)  # template and question: never cut
    room = n_ctx - max_new_tokens - fixed
    if not truncate or room < 1:
        raise ContextOverflowError(_overflow_message(prompt.n_tokens, max_new_tokens, n_ctx, truncate, fixed))
    return cut_document(model, prompt, room)


def _overflow_message(n_tokens: int, max_new_tokens: int, n_ctx: int, truncate: bool, fixed: int) -> str:
    needed = n_tokens + max_new_tokens
    head = (
        f"the prompt has {n_tokens} tokens; with {max_new_tokens} new tokens it needs {needed}, "
        f"but the target's context window is {n_ctx} tokens ({needed - n_ctx} over)"
    )
    if truncate:
        return (
            head + f"; even without the document, the question and the answer need "
            f"{fixed + max_new_tokens} tokens: shorten the question or lower the max new tokens"
        )
    return head + "; shorten the document, lower the max new tokens, or turn on truncation"


def cut_document(
    model: LlamaModel, prompt: PreparedPrompt, keep_tokens: int
) -> tuple[PreparedPrompt, Truncation]:
    """Keep the first `keep_tokens` document tokens; the document text is cut where they end."""
    start, end = prompt.doc_token_span
    kept = prompt.tokens[start : start + keep_tokens]
    document = prompt.parts.document
    n_chars = min(_chars_spelled(model, kept), len(document))
    tokens = np.concatenate([prompt.tokens[:start], kept, prompt.tokens[end:]]).astype(np.int32)
    cut = PreparedPrompt(
        parts=replace(prompt.parts, document=document[:n_chars]),
        tokens=tokens,
        doc_token_span=(start, start + len(kept)),
    )
    return cut, Truncation(
        doc_tokens=end - start,
        cut_tokens=end - start - len(kept),
        doc_chars=len(document),
        cut_chars=len(document) - n_chars,
    )


def _chars_spelled(model: LlamaModel, tokens: np.ndarray) -> int:
    """Characters the tokens spell; a character split across the cut is left out."""
    data = b"".join(model.token_piece(int(t)) for t in tokens)
    return len(codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False))
