"""A GGUF file's header read without its weights: the metadata and the tensors' shapes.

gguf.GGUFReader builds numpy views of every field, so the 151,936-token vocabulary of a
1.5B Qwen takes it about 7 s; this reader skips the arrays it is not asked for and reads
the same header in a fraction of that. The file is memory-mapped and only the header's pages
are touched. Every length is checked against the file's size, so a corrupt or hostile file
is a GGUFHeaderError, never a huge allocation or a read past the end.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguf import GGUFValueType

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_KV = 1 << 16  # metadata keys; real files have tens
MAX_TENSORS = 1 << 20
MAX_DIMS = 8  # ggml tensors have at most 4 dimensions

_SCALARS = {
    GGUFValueType.UINT8: "<B",
    GGUFValueType.INT8: "<b",
    GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h",
    GGUFValueType.UINT32: "<I",
    GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f",
    GGUFValueType.BOOL: "<?",
    GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q",
    GGUFValueType.FLOAT64: "<d",
}


class GGUFHeaderError(ValueError):
    """The file is not a GGUF this reader understands, or its header is truncated or corrupt."""


@dataclass
class GGUFHeader:
    version: int
    metadata: dict[str, Any]  # scalars and strings; arrays only where asked for
    array_lengths: dict[str, int]  # every array's length, read or skipped
    n_parameters: int  # the sum of the tensors' element counts
    n_tensors: int
    tensor_names: list[str] = field(default_factory=list)


class _Cursor:
    """Little-endian reads over a memory map, each bounded by the file's end."""

    def __init__(self, data: mmap.mmap):
        self.data, self.pos, self.size = data, 0, len(data)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise GGUFHeaderError(
                f"truncated header (needs {n} bytes at offset {self.pos}, file has {self.size})"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GGUFHeaderError(
                f"truncated header (skips {n} bytes at offset {self.pos}, file has {self.size})"
            )
        self.pos += n

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.unpack("<Q")).decode("utf-8", "replace")

    def skip_string(self) -> None:
        self.skip(self.unpack("<Q"))


def _value_type(cursor: _Cursor) -> GGUFValueType:
    raw = cursor.unpack("<I")
    try:
        return GGUFValueType(raw)
    except ValueError:
        raise GGUFHeaderError(f"unknown metadata value type {raw} at offset {cursor.pos - 4}") from None


def _scalar(cursor: _Cursor, kind: GGUFValueType) -> Any:
    if kind == GGUFValueType.STRING:
        return cursor.string()
    if kind not in _SCALARS:
        raise GGUFHeaderError(f"metadata value type {kind.name} cannot be nested here")
    return cursor.unpack(_SCALARS[kind])


def _array(cursor: _Cursor, keep: bool) -> tuple[list | None, int]:
    """(the values, or None when skipped; the length). Fixed-size elements are skipped in one seek."""
    kind = _value_type(cursor)
    count = cursor.unpack("<Q")
    if count > cursor.size:  # every element takes at least one byte
        raise GGUFHeaderError(f"array of {count} elements in a file of {cursor.size} bytes")
    if keep:
        return [_scalar(cursor, kind) for _ in range(count)], count
    if kind == GGUFValueType.STRING:
        for _ in range(count):
            cursor.skip_string()
    elif kind in _SCALARS:
        cursor.skip(count * struct.calcsize(_SCALARS[kind]))
    else:
        raise GGUFHeaderError(f"arrays of {kind.name} are not supported")
    return None, count


def _read_kv(cursor: _Cursor, n_kv: int, arrays: frozenset[str]) -> tuple[dict[str, Any], dict[str, int]]:
    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for _ in range(n_kv):
        key = cursor.string()
        kind = _value_type(cursor)
        if kind == GGUFValueType.ARRAY:
            values, lengths[key] = _array(cursor, key in arrays)
            if values is not None:
                metadata[key] = values
        else:
            metadata[key] = _scalar(cursor, kind)
    return metadata, lengths


def _read_tensors(cursor: _Cursor, n_tensors: int) -> tuple[int, list[str]]:
    """The tensors' total element count and names: their shapes are in the header, no data read."""
    total, names = 0, []
    for _ in range(n_tensors):
        names.append(cursor.string())
        n_dims = cursor.unpack("<I")
        if n_dims > MAX_DIMS:
            raise GGUFHeaderError(f"tensor {names[-1]!r} has {n_dims} dimensions")
        elements = 1
        for _ in range(n_dims):
            elements *= cursor.unpack("<Q")
        cursor.skip(4 + 8)  # ggml type, data offset
        total += elements
    return total, names


def _read(data: mmap.mmap, arrays: frozenset[str]) -> GGUFHeader:
    cursor = _Cursor(data)
    if cursor.take(4) != MAGIC:
        raise GGUFHeaderError("not a GGUF file (bad magic)")
    version = cursor.unpack("<I")
    if version not in SUPPORTED_VERSIONS:
        raise GGUFHeaderError(f"unsupported GGUF version {version}")
    n_tensors, n_kv = cursor.unpack("<Q"), cursor.unpack("<Q")
    if n_kv > MAX_KV or n_tensors > MAX_TENSORS:
        raise GGUFHeaderError(f"implausible header ({n_kv} metadata keys, {n_tensors} tensors)")
    metadata, lengths = _read_kv(cursor, n_kv, arrays)
    n_parameters, names = _read_tensors(cursor, n_tensors)
    return GGUFHeader(version, metadata, lengths, n_parameters, n_tensors, names)


def read_header(path: str | Path, arrays: tuple[str, ...] = ()) -> GGUFHeader:
    """The header of the GGUF at `path`; the arrays named in `arrays` are read, the others skipped.

    Raises GGUFHeaderError for a malformed file and OSError for one that cannot be opened."""
    with open(path, "rb") as fh:
        try:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise GGUFHeaderError("empty file") from None
        with data:
            return _read(data, frozenset(arrays))
