"""The request pipeline: both models loaded together, answering with and without SpecPrefill.

`Engine` loads lazily (PEP 562): importing a light module of this package (the session)
does not import torch and llama.cpp.
"""

from engine.pipeline.session import SESSION_MODES, DocumentSession

__all__ = ["SESSION_MODES", "DocumentSession", "Engine", "EngineInfo"]


def __getattr__(name: str):
    if name in ("Engine", "EngineInfo"):
        from engine.pipeline import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
