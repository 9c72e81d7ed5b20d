"""Helpers shared by the ingesters: progress type, limits, binary sniffing, decoding."""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine.core.cancel import NEVER, CancelToken

Progress = Callable[[int, int, str], None]

SNIFF_BYTES = 8 * 1024
PDF_MAGIC = b"%PDF-"

# Extensions whose files are never text we can use. Lower case, with the dot.
BINARY_EXTENSIONS = frozenset(
    """
    .png .jpg .jpeg .gif .bmp .tif .tiff .ico .icns .webp .psd .xcf .heic .avif
    .mp3 .wav .flac .ogg .oga .opus .m4a .aac .mid .midi
    .mp4 .m4v .mkv .avi .mov .webm .wmv .flv
    .zip .gz .tgz .bz2 .xz .zst .lz .lzma .7z .rar .tar .jar .war .ear .whl .egg
    .deb .rpm .apk .dmg .iso .img .msi .cab
    .exe .dll .so .dylib .a .lib .o .obj .ko .elf .bin .dat .class .pyc .pyo .pyd
    .wasm .beam .luac
    .ttf .otf .woff .woff2 .eot .pfb
    .pdf .doc .docx .xls .xlsx .ppt .pptx .odt .ods .odp .epub .rtf
    .sqlite .sqlite3 .db .mdb .pkl .pickle .npy .npz .h5 .hdf5 .parquet .feather
    .pt .pth .ckpt .onnx .gguf .ggml .safetensors .tflite .pb
    """.split()
)


def has_binary_extension(name: str) -> bool:
    dot = name.rfind(".")
    return dot > 0 and name[dot:].lower() in BINARY_EXTENSIONS


def looks_binary(head: bytes) -> bool:
    """True when the first bytes of a file hold a NUL byte (and no UTF-16 BOM)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in head[:SNIFF_BYTES]


@dataclass(frozen=True)
class FolderLimits:
    """Bounds on how much of a code folder is read."""

    max_files: int = 5000
    max_total_bytes: int = 8 * 1024 * 1024
    max_file_bytes: int = 512 * 1024
    max_entries: int = 200_000  # directory entries looked at, read or not


@dataclass(frozen=True)
class IngestLimits:
    """Bounds on every kind of document."""

    max_pdf_pages: int = 2000
    max_text_bytes: int = 32 * 1024 * 1024  # also the cap on the text a PDF yields, in characters
    # A compressed PDF stream may inflate to this much and no more: a decompression bomb
    # fails its page instead of filling memory. Real content streams stay far below.
    max_pdf_stream_bytes: int = 8 * 1024 * 1024
    max_pdf_repair_bytes: int = 256 * 1024 * 1024  # a damaged PDF is read whole to repair it, up to this
    folder: FolderLimits = field(default_factory=FolderLimits)


def token(cancel: CancelToken | None) -> CancelToken:
    return cancel if cancel is not None else NEVER


def human_bytes(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MB"
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.1f} MB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KB"
    if n >= 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n} bytes"


def page_ranges(numbers: Iterable[int]) -> str:
    """[3, 7, 8, 9] -> '3, 7-9'."""
    nums = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


def name_list(names: list[str], most: int = 5) -> str:
    """'a, b, c' or 'a, b, c, d, e and 7 more'."""
    if len(names) <= most:
        return ", ".join(names)
    return ", ".join(names[:most]) + f" and {len(names) - most} more"


def printable_name(name: str) -> str:
    """A file name as valid UTF-8 text. Bytes of a name that are not UTF-8 (which Python holds as
    surrogate escapes, and which no UTF-8 encoder accepts) show as \\xNN, e.g. caf\\xe9.py."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def clean_text(text: str) -> str:
    """Normalise line ends to \\n and drop control characters other than \\t \\n \\f."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


def decode_bytes(data: bytes, *, truncated: bool = False) -> tuple[str, bool]:
    """Decode file bytes as text. Returns (text, clean) where clean is False when
    bytes were not valid and were replaced.

    UTF-8 (with or without BOM) is the norm; a UTF-16 BOM is honoured. When the
    data was cut at a cap (`truncated`), a partial character at the end is
    dropped, not reported as invalid.
    """
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        if truncated and len(data) % 2:
            data = data[:-1]
        try:
            return data.decode("utf-16"), True
        except UnicodeDecodeError:
            return data.decode("utf-16", errors="replace"), False
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        return decoder.decode(data, final=not truncated), True
    except UnicodeDecodeError:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        return decoder.decode(data, final=not truncated), False
