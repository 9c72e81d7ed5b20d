"""The target model's prefill and decode over explicit positions."""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from engine.core.cancel import NEVER, CancelToken
from engine.core.errors import Cancelled, RuntimeFailure
from engine.core.steps import Steps, chunk_ranges, run_to_end
from engine.llama.native import LlamaContext, LlamaModel, decode_error_message
from engine.llama.sampler import GREEDY, SamplingParams, TokenSampler


@dataclass(frozen=True)
class GeneratedToken:
    token: int
    text: str  # decoded text; a partial UTF-8 sequence waits for the next token


class TargetRuntime:
    """One target model + one context. Not thread-safe: one run at a time."""

    def __init__(self, model: LlamaModel, context: LlamaContext, owns_model: bool = True):
        self.model = model
        self.context = context
        self.owns_model = owns_model

    def close(self) -> None:
        self.context.close()
        if self.owns_model:
            self.model.close()

    def sibling(self) -> TargetRuntime:
        """A second context on the same model, with the same settings: a KV cache of its own.
        Closing it leaves the model to this runtime."""
        return TargetRuntime(self.model, self.context.like(), owns_model=False)

    def _decode(self, tokens: np.ndarray, positions: np.ndarray, want_logits: bool) -> None:
        rc = self.context.decode(tokens, positions, want_logits)
        if rc == 2 and self.context.cancel.cancelled:
            raise Cancelled()
        if rc != 0:
            raise RuntimeFailure(decode_error_message(rc))

    def prefill(self, tokens: np.ndarray, positions: np.ndarray, cancel: CancelToken = NEVER) -> np.ndarray:
        return run_to_end(self.iter_prefill(tokens, positions, cancel))

    def iter_prefill(
        self, tokens: np.ndarray, positions: np.ndarray, cancel: CancelToken = NEVER, split: int = 0
    ) -> Steps[np.ndarray]:
        """Clear the KV cache, prefill tokens at the given positions batch by batch.

        Yields (done, total) after each batch; returns the last token's logits. No batch
        crosses index `split` (0: none): see chunk_ranges.
        """
        if len(tokens) == 0:
            raise ValueError("nothing to prefill")
        self.context.clear()
        return (yield from self._iter_batches(tokens, positions, cancel, split))

    def iter_extend(
        self, tokens: np.ndarray, positions: np.ndarray, cancel: CancelToken = NEVER, split: int = 0
    ) -> Steps[np.ndarray]:
        """Prefill tokens at the given positions on top of what the KV cache holds (no clear):
        a cached prefix plus a new tail. Yields and returns as iter_prefill."""
        if len(tokens) == 0:
            raise ValueError("nothing to prefill")
        return (yield from self._iter_batches(tokens, positions, cancel, split))

    def _iter_batches(
        self, tokens: np.ndarray, positions: np.ndarray, cancel: CancelToken, split: int = 0
    ) -> Steps[np.ndarray]:
        with self._abort_on(cancel):
            for start, end in chunk_ranges(0, len(tokens), self.context.n_batch, split):
                cancel.raise_if_cancelled()
                self._decode(tokens[start:end], positions[start:end], want_logits=end == len(tokens))
                yield end, len(tokens)
        return self.context.last_logits()

    @contextmanager
    def _abort_on(self, cancel: CancelToken):
        """llama.cpp's abort hook follows this token for the block, then no token at all."""
        self.context.cancel = cancel
        try:
            yield
        finally:
            self.context.cancel = NEVER

    def generate(
        self,
        first_logits: np.ndarray,
        next_position: int,
        max_new_tokens: int,
        cancel: CancelToken = NEVER,
        sampling: SamplingParams = GREEDY,
    ) -> Iterator[GeneratedToken]:
        """Decode the answer: the first token comes from the prefill's logits, each next one from a
        decode. Greedy by default; `sampling` otherwise (engine.llama.sampler)."""
        with TokenSampler(sampling, len(first_logits)) as sampler:
            yield from self._decode_answer(sampler, first_logits, next_position, max_new_tokens, cancel)

    def _decode_answer(
        self,
        sampler: TokenSampler,
        first_logits: np.ndarray,
        next_position: int,
        max_new_tokens: int,
        cancel: CancelToken,
    ) -> Iterator[GeneratedToken]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        token = sampler.sample(first_logits)
        position = next_position
        for i in range(max_new_tokens):
            cancel.raise_if_cancelled()  # before every token, the first included: nothing shows after Cancel
            if self.model.is_eog(token):
                return
            yield GeneratedToken(token, decoder.decode(self.model.token_piece(token)))
            if i + 1 == max_new_tokens or position >= self.context.n_ctx:
                return
            cancel.raise_if_cancelled()
            with self._abort_on(cancel):
                self._decode(np.array([token], dtype=np.int32), np.array([position], dtype=np.int32), True)
            token = sampler.sample(self.context.last_logits())
            position += 1

    def accepts_gapped_positions(self) -> bool:
        """Probe the runtime: the patched build accepts gaps within a batch and across batches."""
        self.context.clear()
        try:
            inside = self.context.decode(np.array([1, 2], np.int32), np.array([0, 3], np.int32), False) == 0
            across = (
                inside and self.context.decode(np.array([3], np.int32), np.array([7], np.int32), True) == 0
            )
            return across
        finally:
            self.context.clear()
