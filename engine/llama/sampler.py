"""How the answer's tokens are chosen from the target's logits: greedy, or llama.cpp's sampler chain.

Greedy (temperature 0, no penalties) is the argmax of the logits, as the app has always decoded.
Otherwise a llama.cpp sampler chain (penalties, top-k, top-p, min-p, temperature, then a seeded
draw) picks each token. The chain works on the logits it is handed, not on a context's, so the
first token comes from the prefill's logits and a target in a host process (RPC) samples the
same way as a local one.
"""

from __future__ import annotations

import ctypes
import secrets
from dataclasses import dataclass

import llama_cpp.llama_cpp as L
import numpy as np

from engine.core.errors import RuntimeFailure
from engine.core.settings import PENALTY_WINDOW, SEED_MAX, RunSettings

# llama_token_data's layout (id, logit, p): the candidates array is filled from numpy in one go.
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
MIN_KEEP = 1  # top-p and min-p never leave fewer candidates than this


@dataclass(frozen=True)
class SamplingParams:
    """The settings that choose each answer token (RunSettings' Sampling group)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None  # None: a random seed per run
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repeat_penalty: float = 1.0

    @classmethod
    def from_settings(cls, settings: RunSettings) -> SamplingParams:
        return cls(
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            min_p=settings.min_p,
            seed=settings.seed,
            presence_penalty=settings.presence_penalty,
            frequency_penalty=settings.frequency_penalty,
            repeat_penalty=settings.repeat_penalty,
        )

    @property
    def penalized(self) -> bool:
        return self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0

    @property
    def greedy(self) -> bool:
        """The likeliest token every time: the argmax of the logits, with no llama.cpp sampler."""
        return self.temperature == 0.0 and not self.penalized


GREEDY = SamplingParams()


def run_seed(seed: int | None) -> int:
    """The seed a run samples with: the one asked for, or a fresh random one."""
    return secrets.randbelow(SEED_MAX + 1) if seed is None else seed


class TokenSampler:
    """Chooses one answer's tokens. Greedy: argmax; otherwise it owns a llama.cpp sampler chain,
    freed exactly once (close() or garbage collection). One per answer: the penalties remember
    the tokens it chose, and the draw is seeded when it is made."""

    def __init__(self, params: SamplingParams, n_vocab: int):
        self._chain = None  # close() may run before the chain exists
        self.params = params
        self.seed = None if params.greedy else run_seed(params.seed)
        self._chain = None if params.greedy else _new_chain(params, n_vocab, self.seed)
        self._candidates = None if params.greedy else np.zeros(n_vocab, dtype=TOKEN_DATA)

    def sample(self, logits: np.ndarray) -> int:
        """The next token from these logits (one per vocabulary entry), noted for the penalties."""
        if self.params.greedy:
            return int(np.argmax(logits))
        if self._chain is None:
            raise RuntimeError("sampler is closed")
        token = self._apply_chain(logits)
        L.llama_sampler_accept(self._chain, token)
        return token

    def _apply_chain(self, logits: np.ndarray) -> int:
        candidates = self._candidates
        candidates["id"] = np.arange(len(candidates), dtype=np.int32)  # the chain reorders them in place
        candidates["logit"] = logits
        candidates["p"] = 0.0
        array = L.llama_token_data_array(
            data=candidates.ctypes.data_as(ctypes.POINTER(L.llama_token_data)),
            size=len(candidates),
            selected=-1,
            sorted=False,
        )
        L.llama_sampler_apply(self._chain, ctypes.byref(array))
        if array.selected < 0:
            raise RuntimeFailure("llama.cpp's sampler chain selected no token")
        return int(array.data[array.selected].id)  # the chain may point `data` elsewhere

    def close(self) -> None:
        if self._chain is not None:
            L.llama_sampler_free(self._chain)
            self._chain = None

    def __del__(self):
        self.close()

    def __enter__(self) -> TokenSampler:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def _new_chain(params: SamplingParams, n_vocab: int, seed: int):
    """penalties, top-k, top-p, min-p, temperature, then the draw (or the likeliest token at
    temperature 0): llama.cpp's own order. The chain owns every sampler added to it."""
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    if not chain:
        raise RuntimeFailure("llama.cpp could not create a sampler chain")
    for sampler in _stages(params, n_vocab, seed):
        L.llama_sampler_chain_add(chain, sampler)
    return chain


def _stages(params: SamplingParams, n_vocab: int, seed: int) -> list:
    stages = []
    if params.penalized:
        stages.append(
            L.llama_sampler_init_penalties(
                n_vocab,
                PENALTY_WINDOW,
                params.repeat_penalty,
                params.frequency_penalty,
                params.presence_penalty,
            )
        )
    if params.temperature == 0.0:  # penalties alone: then the likeliest token
        return [*stages, L.llama_sampler_init_greedy()]
    if params.top_k > 0:
        stages.append(L.llama_sampler_init_top_k(params.top_k))
    if params.top_p < 1.0:
        stages.append(L.llama_sampler_init_top_p(params.top_p, MIN_KEEP))
    if params.min_p > 0.0:
        stages.append(L.llama_sampler_init_min_p(params.min_p, MIN_KEEP))
    stages.append(L.llama_sampler_init_temp(params.temperature))
    stages.append(L.llama_sampler_init_dist(seed))
    return stages
