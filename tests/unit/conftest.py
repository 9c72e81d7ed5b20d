"""Fixtures shared by unit tests: a tiny random target/draft GGUF pair and an Engine over it."""

from __future__ import annotations

import pytest

from engine.core.settings import ModelSettings
from engine.pipeline import Engine
from tests.fixtures.tiny_gguf import write_tiny_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return write_tiny_pair(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def cache_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(home))
        yield home


@pytest.fixture(scope="module")
def engine(pair, cache_home):
    target, draft = pair
    loaded = Engine.load(
        ModelSettings(target_path=target, draft_path=draft, n_ctx=512, n_batch=64, n_threads=1)
    )
    yield loaded
    loaded.close()
