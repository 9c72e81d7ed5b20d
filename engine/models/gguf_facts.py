"""What a GGUF says about itself, for a listing: architecture, size, quantization, context window.

The header's strings come from the internet: the facts hold them as printable() gives them back,
so neither the CLI nor the app ever shows a control character from a model file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gguf import LlamaFileType

from engine.models.gguf_header import GGUFHeader, read_header
from engine.models.untrusted import printable


@dataclass(frozen=True)
class GGUFFacts:
    title: str | None  # general.name
    architecture: str | None
    parameters: int  # counted from the tensors' shapes
    size_label: str  # general.size_label, else the count rounded ("1.5B")
    quantization: str | None  # general.file_type by name: "Q4_K_M", "F16"
    context_length: int | None


def quantization_name(file_type: object) -> str | None:
    """llama.cpp's file type number by name: 15 -> "Q4_K_M", 0 -> "F32"; unknown numbers as "type 99"."""
    if not isinstance(file_type, int):
        return None
    try:
        name = LlamaFileType(file_type).name
    except ValueError:
        return f"type {file_type}"
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def size_label(parameters: int) -> str:
    """1_543_714_304 -> "1.5B", 494_032_768 -> "494M": how model names round their size."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if parameters >= scale:
            value = parameters / scale
            return f"{value:.1f}{unit}".replace(".0" + unit, unit) if value < 10 else f"{value:.0f}{unit}"
    return str(parameters)


def _shown(value: object) -> str | None:
    """A header string as it may be shown; None for a value that is not a string."""
    return printable(value) if isinstance(value, str) else None


def facts_of(header: GGUFHeader) -> GGUFFacts:
    meta = header.metadata
    arch = meta.get("general.architecture")
    arch = arch if isinstance(arch, str) else None
    context = meta.get(f"{arch}.context_length") if arch else None
    label = _shown(meta.get("general.size_label"))
    return GGUFFacts(
        title=_shown(meta.get("general.name")),
        architecture=_shown(arch),
        parameters=header.n_parameters,
        size_label=label or size_label(header.n_parameters),
        quantization=quantization_name(meta.get("general.file_type")),
        context_length=context if isinstance(context, int) else None,
    )


def read_facts(path: str | Path) -> GGUFFacts:
    """Raises GGUFHeaderError or OSError for a file that cannot be read as a GGUF."""
    return facts_of(read_header(path))
