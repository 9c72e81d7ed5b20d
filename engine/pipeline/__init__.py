"""The request pipeline: both models loaded together, answering with and without SpecPrefill."""

from engine.pipeline.engine import Engine, EngineInfo
from engine.pipeline.session import SESSION_MODES, DocumentSession

__all__ = ["SESSION_MODES", "DocumentSession", "Engine", "EngineInfo"]
