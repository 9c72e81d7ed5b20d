"""Files and text that came from the internet: Ollama manifests, saved states' sidecars, GGUF headers.

Such a small JSON file is read only when it is a regular file of a bounded size (a FIFO would
block the reader forever), and anything it cannot be (not UTF-8, not JSON, nested past Python's
recursion limit) is one MalformedFile error, so each caller skips the file instead of crashing.
Every string from these files that is printed or shown goes through printable() first: a model's
name must not retitle or clear the user's terminal.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

# C0 (ESC among them), DEL and C1 controls; lone surrogates (a file name's undecodable bytes);
# the line and paragraph separators; the bidirectional overrides and isolates that can reorder
# what follows them on screen.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


class MalformedFile(ValueError):
    """The file is not what it should be: not a regular file, too large, or not the JSON expected."""


def printable(text: str) -> str:
    """The text with each control character written as an escape: "a\\x1bb" for "a", ESC, "b"."""
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def file_kind(mode: int) -> str:
    """What a non-regular file is, in a message: "a FIFO", "a folder"."""
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def open_regular(path: str | os.PathLike[str]) -> int:
    """A file descriptor for reading the regular file at `path` (links followed). Opening never
    blocks, even on a FIFO; anything but a regular file is refused with MalformedFile.
    Raises OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise MalformedFile(f"not a regular file ({file_kind(mode)})")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_small_file(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The regular file's bytes; MalformedFile when it is no regular file or over `max_bytes`."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise MalformedFile(f"over {max_bytes:,} bytes")
    return data


def load_json_file(path: str | os.PathLike[str], max_bytes: int) -> Any:
    """The JSON value in a small file. Raises MalformedFile for a file that is not one, and OSError
    for one that cannot be read."""
    data = read_small_file(Path(path), max_bytes)
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise MalformedFile("nested too deeply") from None
    except UnicodeDecodeError:
        raise MalformedFile("not UTF-8 text") from None
    except ValueError as exc:
        raise MalformedFile(f"not JSON: {exc}") from None


def load_json_object(path: str | os.PathLike[str], max_bytes: int) -> dict[str, Any]:
    """As load_json_file, for a file whose value must be a JSON object."""
    value = load_json_file(path, max_bytes)
    if not isinstance(value, dict):
        raise MalformedFile(f"a JSON {type(value).__name__}, not an object")
    return value
