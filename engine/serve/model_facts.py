"""What Ollama's model lists say of the served target: its size, family, parameter count and
quantization, read from the GGUF's header once at start (never the whole file)."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from pathlib import Path

from engine.api import GGUFHeaderError, content_identity, printable, read_gguf_header
from engine.serve.state import ModelFacts

log = logging.getLogger("specprefill.serve")
QUANT_IN_NAME = re.compile(r"(?i)(?:^|[-_.])((?:i?q\d+(?:_[a-z0-9]+)*)|f16|bf16|f32)$")


def parameter_size(n_parameters: int) -> str:
    """Ollama's way of writing it: "494.03M", "1.5B"."""
    if n_parameters >= 1_000_000_000:
        return f"{n_parameters / 1e9:.1f}B"
    return f"{n_parameters / 1e6:.2f}M"


def quantization_of(path: Path) -> str:
    match = QUANT_IN_NAME.search(path.stem)
    return match.group(1).upper() if match else ""


def model_facts(path: Path, n_ctx: int) -> ModelFacts:
    """The facts of a target GGUF; a header that cannot be read leaves them empty (logged)."""
    try:
        stat = path.stat()
        header = read_gguf_header(path)
        digest = content_identity(path)
    except (OSError, GGUFHeaderError) as exc:
        log.warning("the target's header could not be read for the model list: %s", exc)
        return ModelFacts(context_length=n_ctx)
    family = str(header.metadata.get("general.architecture", ""))
    return ModelFacts(
        size=stat.st_size,
        digest=digest,
        family=printable(family)[:64],
        parameter_size=parameter_size(header.n_parameters),
        n_parameters=header.n_parameters,
        quantization_level=quantization_of(path),
        context_length=n_ctx,
        modified_at=datetime.fromtimestamp(stat.st_mtime, UTC).isoformat().replace("+00:00", "Z"),
    )
