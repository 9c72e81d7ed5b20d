"""The target context that holds sessions' full prefixes, apart from the main one, so the
SpecPrefill runs in between never overwrite them."""

from __future__ import annotations

from engine.core.memory import needs_by_device, require_all_fit
from engine.llama.memory import target_kv_shape
from engine.llama.runtime import TargetRuntime


class PrefixContext:
    """A sibling of the main runtime, opened on first use (`runtime()`)."""

    def __init__(self, main: TargetRuntime, memory_device: str):
        self._main = main
        self._memory_device = memory_device  # whose memory its KV cache takes: "cpu" or "cuda"
        self._runtime: TargetRuntime | None = None

    @property
    def opened(self) -> bool:
        return self._runtime is not None

    def runtime(self) -> TargetRuntime:
        """The prefix context, opened now when it is not yet: a KV cache as large as the main
        context's, so its memory is checked first."""
        if self._runtime is None:
            n_ctx = self._main.context.n_ctx
            kv = target_kv_shape(self._main.model).bytes_for(n_ctx)
            require_all_fit(
                needs_by_device(
                    "keeping the document's full prefix in a second context",
                    ((self._memory_device, f"target KV cache for {n_ctx} tokens", kv),),
                )
            )
            self._runtime = self._main.sibling()
        return self._runtime

    def clear(self) -> None:
        """Empty it when it is open (its memory is reused by the next document)."""
        if self._runtime is not None:
            self._runtime.context.clear()

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()
