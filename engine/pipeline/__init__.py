"""The request pipeline: both models loaded together, answering with and without SpecPrefill."""

from engine.pipeline.engine import Engine, EngineInfo

__all__ = ["Engine", "EngineInfo"]
