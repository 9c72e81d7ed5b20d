"""Errors a user can act on. The CLI prints them on one line and exits 2."""


class SpecPrefillError(Exception):
    """A user-facing error: bad input, missing model, context overflow."""


class IngestError(SpecPrefillError):
    """A document could not be read."""


class ModelError(SpecPrefillError):
    """A model is missing, corrupt, or incompatible."""


class ContextOverflowError(SpecPrefillError):
    """The prompt does not fit the target's context window."""


class RuntimeFailure(SpecPrefillError):
    """The native runtime reported an error."""


class Cancelled(Exception):
    """The user cancelled the run. Not an error: nothing is reported as failed."""
