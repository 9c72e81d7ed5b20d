"""Errors a user can act on. The CLI prints them on one line and exits 2."""


class SpecPrefillError(Exception):
    """A user-facing error: bad input, missing model, context overflow."""


class SettingsError(SpecPrefillError, ValueError):
    """A setting is out of its range or not one of its choices (checked before any model loads)."""


class IngestError(SpecPrefillError):
    """A document could not be read."""


class PasswordError(IngestError):
    """An encrypted PDF was opened without its password, or with a wrong one."""


class ModelError(SpecPrefillError):
    """A model is missing, corrupt, or incompatible."""


class DefaultModelsError(ModelError):
    """A default model is missing or fails its hash: re-assembling the defaults fixes it."""


class PositionsUnsupportedError(ModelError):
    """`restore` positions were asked for, but this llama.cpp build rejects gapped positions."""


class NotCalibratedError(SpecPrefillError):
    """A prediction was asked for, but this machine has no calibration yet."""


class ContextOverflowError(SpecPrefillError):
    """The prompt does not fit the target's context window."""


class InsufficientMemoryError(SpecPrefillError):
    """The machine cannot hold what a load or a run needs."""


class EngineBusyError(SpecPrefillError):
    """A second run was asked of an engine that is still running one."""


class RuntimeFailure(SpecPrefillError):
    """The native runtime reported an error."""


class WorkerLostError(RuntimeFailure):
    """An RPC worker stopped answering (or the process that talks to it died): the run ended."""


class Cancelled(Exception):
    """The user cancelled the run. Not an error: nothing is reported as failed."""


class CacheError(SpecPrefillError):
    """The cache folder cannot be written (read-only or full), so a model cannot be made there."""
