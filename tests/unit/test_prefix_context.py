"""PrefixContext: the sessions' second target context, opened once on first use, its memory checked first."""

from __future__ import annotations

import pytest

from engine.core import memory
from engine.core.errors import InsufficientMemoryError
from engine.pipeline.prefix_context import PrefixContext


def test_it_opens_on_first_use_only_and_once(engine):
    context = PrefixContext(engine.runtime, engine.info.target_memory_device)
    context.clear()  # nothing open yet: nothing to clear, nothing opened
    assert not context.opened
    try:
        first = context.runtime()
        assert context.opened and context.runtime() is first
        assert first is not engine.runtime and first.context.n_ctx == engine.runtime.context.n_ctx
    finally:
        context.close()


def test_too_little_memory_for_its_kv_cache_is_refused_before_opening(engine, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1)
    context = PrefixContext(engine.runtime, engine.info.target_memory_device)
    with pytest.raises(InsufficientMemoryError, match="full prefix in a second context"):
        context.runtime()
    assert not context.opened
