"""Selection through character spans, for a draft whose vocabulary is not the target's.

The draft reads the prompt in its own tokens: the same document and question in its own chat
template, tokenized by its own vocabulary (llama.cpp, vocab only). Its kept chunks become
character spans of the document; the target keeps every one of its document tokens that shares a
character with a kept span, and all of its template, system prompt and question tokens. Each
kept target token keeps its index in the target's full tokenization, which restore uses as its
position.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.core.spans import (
    Spans,
    clip_spans,
    shift_spans,
    spans_of_tokens,
    token_char_spans,
    tokens_overlapping,
)
from engine.llama.native import LlamaModel
from engine.llama.prompt import PreparedPrompt, render_parts, tokenize_parts


def prompt_token_spans(model: LlamaModel, prompt: PreparedPrompt) -> Spans:
    """Each prompt token's character span in the prompt text.

    The template's head, the document and what follows it are tokenized apart (tokenize_parts),
    so each is read against its own text: a tokenizer whose pieces do not add up to a part's
    bytes shifts that part's spans only, never the document's."""
    parts = prompt.parts
    pieces = [len(model.token_piece(int(t))) for t in prompt.tokens]
    doc_start, doc_end = prompt.doc_token_span
    texts = (parts.prefix, parts.document, parts.suffix)
    bounds = ((0, doc_start), (doc_start, doc_end), (doc_end, prompt.n_tokens))
    offsets = (0, len(parts.prefix), len(parts.prefix) + len(parts.document))
    spans = [
        shift_spans(token_char_spans(text, pieces[a:b]), offset)
        for text, (a, b), offset in zip(texts, bounds, offsets, strict=True)
    ]
    return np.concatenate(spans, axis=0)


def starts_of(spans: Spans) -> list[int]:
    """The tokens' start offsets: what the token path's selection reads (token_char_offsets)."""
    return np.asarray(spans)[:, 0].tolist()


def draft_prompt(
    draft_vocab: LlamaModel, target_prompt: PreparedPrompt, system_prompt: str
) -> PreparedPrompt:
    """The target's document and question as the draft reads them: in the draft's own template."""
    parts = render_parts(
        draft_vocab, target_prompt.parts.document, target_prompt.parts.question, system_prompt
    )
    return tokenize_parts(draft_vocab, parts)


def prompt_the_draft_reads(
    draft_vocab: LlamaModel | None, target_prompt: PreparedPrompt, system_prompt: str
) -> PreparedPrompt:
    """The prompt the draft scores: the target's own when the draft shares its vocabulary
    (`draft_vocab` None), else the draft's (draft_prompt). Its tokens before `tail_start` are the
    document's prefix in the draft's tokens, the same for every question: the draft cache's."""
    if draft_vocab is None:
        return target_prompt
    return draft_prompt(draft_vocab, target_prompt, system_prompt)


def kept_document_spans(prompt: PreparedPrompt, token_spans: Spans, kept_idx: Sequence[int]) -> Spans:
    """The document characters that the kept tokens cover, relative to the document's start."""
    doc_lo, doc_hi = prompt.parts.doc_char_span
    covered = clip_spans(spans_of_tokens(token_spans, kept_idx), doc_lo, doc_hi)
    return shift_spans(covered, -doc_lo)


def target_tokens_for(spans: Spans, prompt: PreparedPrompt, token_spans: Spans) -> np.ndarray:
    """The target's kept token indices (ascending): its document tokens that overlap the document
    spans (relative to the document's start), and every token before and after the document."""
    doc_lo = prompt.parts.doc_char_span[0]
    n_chars = len(prompt.parts.text)
    start, end = prompt.doc_token_span
    overlapping = tokens_overlapping(token_spans, shift_spans(spans, doc_lo), n_chars)
    document = overlapping[(overlapping >= start) & (overlapping < end)]
    whole = np.concatenate([np.arange(0, start), document, np.arange(end, prompt.n_tokens)])
    return whole.astype(np.int64)


def map_kept(
    draft: PreparedPrompt,
    draft_spans: Spans,
    draft_kept: Sequence[int],
    target: PreparedPrompt,
    target_spans: Spans,
) -> np.ndarray:
    """The draft's kept tokens as the target's kept tokens, through the document's characters."""
    return target_tokens_for(kept_document_spans(draft, draft_spans, draft_kept), target, target_spans)


def draft_budget(
    target_budget: int | None, draft_tokens: int, target_tokens: int, shrink: float = 1.0
) -> int | None:
    """The draft-token budget that keeps about `target_budget` target tokens (None: no limit), the
    tokens' ratio between the two tokenizations scaled by `shrink` when a first try kept too many."""
    if target_budget is None:
        return None
    return max(1, int(target_budget * shrink * draft_tokens / max(target_tokens, 1)))
