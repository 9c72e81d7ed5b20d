"""A GGUF file's header read without its weights: the metadata and the tensors' shapes.

gguf.GGUFReader builds numpy views of every field, so the 151,936-token vocabulary of a
1.5B Qwen takes it about 7 s; this reader skips the arrays it is not asked for and reads
the same header in a fraction of that. The file is memory-mapped and only the header's pages
are touched. Every length is checked against the file's size, so a corrupt or hostile file
is a GGUFHeaderError, never a huge allocation or a read past the end.

A hostile header is also bounded in work: a key or tensor name longer than MAX_KEY_BYTES, more
than MAX_METADATA_BYTES copied out of the header, or more than MAX_ARRAY_ELEMENTS array elements
to step through one by one (the strings of an array; fixed-size elements are skipped in one seek)
and the file is refused as malformed before that work is done. Real headers, a 262,144-token
vocabulary among them, stay far inside these bounds. Only a regular file is read: a FIFO or a
device is refused without blocking on it.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguf import GGUFValueType

from engine.models.untrusted import MalformedFile, open_regular

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_KV = 1 << 16  # metadata keys; real files have tens
MAX_TENSORS = 1 << 16  # the largest models have a few thousand
MAX_DIMS = 8  # ggml tensors have at most 4 dimensions
MAX_KEY_BYTES = 256  # a key or a tensor name; real ones are under 64
MAX_METADATA_BYTES = 64 << 20  # copied out of the header; a real one, its vocabulary kept, a few MB
MAX_ARRAY_ELEMENTS = 1 << 21  # read or stepped through one by one; a vocabulary and its merges, under 1M

_LENGTH = struct.Struct("<Q")

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
    """Little-endian reads over a memory map, each bounded by the file's end and the header's budget."""

    def __init__(self, data: mmap.mmap):
        self.data, self.pos, self.size = data, 0, len(data)
        self.copied = 0  # bytes copied out of the map
        self.elements = 0  # array elements read or stepped through one by one

    def _check_room(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise GGUFHeaderError(
                f"truncated header ({what} {n} bytes at offset {self.pos}, file has {self.size})"
            )

    def take(self, n: int) -> bytes:
        self._check_room(n, "needs")
        if self.copied + n > MAX_METADATA_BYTES:
            raise GGUFHeaderError(
                f"malformed header: {n:,} bytes at offset {self.pos} would take its metadata over "
                f"the budget of {MAX_METADATA_BYTES:,} bytes"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        self.copied += n
        return chunk

    def skip(self, n: int) -> None:
        self._check_room(n, "skips")
        self.pos += n

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self.take(self.unpack("<Q")).decode("utf-8", "replace")

    def name(self, what: str) -> str:
        """A key or a tensor name, refused past MAX_KEY_BYTES before any of it is read."""
        length = self.unpack("<Q")
        if length > MAX_KEY_BYTES:
            raise GGUFHeaderError(
                f"malformed header: a {what} of {length:,} bytes at offset {self.pos - 8} "
                f"(at most {MAX_KEY_BYTES} are allowed)"
            )
        return self.take(length).decode("utf-8", "replace")

    def count_elements(self, key: str, count: int) -> None:
        """Charge an array's elements to the budget, refusing the file before they are walked."""
        self.elements += count
        if self.elements > MAX_ARRAY_ELEMENTS:
            raise GGUFHeaderError(
                f"malformed header: array {key!r} of {count:,} elements takes the header over its "
                f"budget of {MAX_ARRAY_ELEMENTS:,} array elements"
            )

    def skip_strings(self, count: int) -> None:
        """Step over `count` strings: each length is read, its bytes are not."""
        pos, unpack_length = self.pos, _LENGTH.unpack_from
        try:
            for _ in range(count):
                pos += 8 + unpack_length(self.data, pos)[0]
        except (struct.error, OverflowError):
            pos = self.size + 1
        if pos > self.size:
            raise GGUFHeaderError(f"truncated header (a string array at offset {self.pos} runs past the end)")
        self.pos = pos

    def scalars(self, kind: GGUFValueType, count: int) -> list:
        """`count` fixed-size values read in one go."""
        code = _SCALARS[kind][1]
        raw = self.take(count * struct.calcsize("<" + code))
        return list(struct.unpack(f"<{count}{code}", raw))


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


def _array(cursor: _Cursor, key: str, keep: bool) -> tuple[list | None, int]:
    """(the values, or None when skipped; the length). Fixed-size elements are skipped in one seek."""
    kind = _value_type(cursor)
    count = cursor.unpack("<Q")
    if kind != GGUFValueType.STRING and kind not in _SCALARS:
        raise GGUFHeaderError(f"arrays of {kind.name} are not supported")
    element = 8 if kind == GGUFValueType.STRING else struct.calcsize(_SCALARS[kind])
    if count > (cursor.size - cursor.pos) // element:  # a string takes at least its 8-byte length
        raise GGUFHeaderError(
            f"truncated header (array {key!r} of {count:,} elements at offset {cursor.pos})"
        )
    if kind == GGUFValueType.STRING:
        cursor.count_elements(key, count)
        if not keep:
            cursor.skip_strings(count)
            return None, count
        return [cursor.string() for _ in range(count)], count
    if not keep:
        cursor.skip(count * element)
        return None, count
    cursor.count_elements(key, count)
    return cursor.scalars(kind, count), count


def _read_kv(cursor: _Cursor, n_kv: int, arrays: frozenset[str]) -> tuple[dict[str, Any], dict[str, int]]:
    metadata: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for _ in range(n_kv):
        key = cursor.name("key")
        kind = _value_type(cursor)
        if kind == GGUFValueType.ARRAY:
            values, lengths[key] = _array(cursor, key, key in arrays)
            if values is not None:
                metadata[key] = values
        else:
            metadata[key] = _scalar(cursor, kind)
    return metadata, lengths


def _read_tensors(cursor: _Cursor, n_tensors: int) -> tuple[int, list[str]]:
    """The tensors' total element count and names: their shapes are in the header, no data read."""
    total, names = 0, []
    for _ in range(n_tensors):
        names.append(cursor.name("tensor name"))
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

    Raises GGUFHeaderError for a malformed file or one that is not a regular file, and OSError
    for one that cannot be opened."""
    try:
        fd = open_regular(path)
    except MalformedFile as exc:
        raise GGUFHeaderError(str(exc)) from None
    try:
        data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except ValueError:  # an empty file cannot be mapped
        raise GGUFHeaderError("empty file") from None
    finally:
        os.close(fd)
    with data:
        return _read(data, frozenset(arrays))
