"""How a failed job reads to the user: the engine's message plus this app's remedy (the engine's
messages name no command-line flags; each front end words its own remedy)."""

from __future__ import annotations

from engine.api import (
    ContextOverflowError,
    NotCalibratedError,
    PasswordError,
    PositionsUnsupportedError,
    SettingsError,
    SpecPrefillError,
)

# The remedy each error type gets in this app, most specific type first.
REMEDIES: tuple[tuple[type[Exception], str], ...] = (
    (PasswordError, "open the file again to enter its password"),
    (PositionsUnsupportedError, "choose renumber or auto in Positions"),
    (
        NotCalibratedError,
        "calibrate this machine once: Models ▸ Calibrate This Machine…, or specprefill calibrate",
    ),
    (
        ContextOverflowError,
        "run SpecPrefill, which fits a long document by selection, or turn on "
        "Settings ▸ Long documents to cut its end",
    ),
    (SettingsError, "check Settings"),
)


def failure_text(error: Exception, job: str) -> str:
    """One line for a failed job: the engine's message and our remedy, or "Unexpected error" for a bug."""
    if not isinstance(error, SpecPrefillError):
        return f"Unexpected error in {job}: {type(error).__name__}: {error}"
    message = str(error) or type(error).__name__
    remedy = next((text for kind, text in REMEDIES if isinstance(error, kind)), "")
    return f"{message} ({remedy})" if remedy else message
