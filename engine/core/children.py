"""Python child processes that never import code from the folder the user started us in.

`python -c` and `python -m` put the current directory first on sys.path, and that directory is
often the code folder the user is about to analyze: a `numpy.py` or `engine/__init__.py` there
would run inside our process tree. Every Python child therefore runs with -P (and
PYTHONSAFEPATH=1 for its own children), finds the engine through an explicit PYTHONPATH, and
starts in a folder we own. See docs/security.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

import engine

SAFE_PATH_FLAG = "-P"  # Python 3.11+: do not prepend the script's folder or the cwd to sys.path


def engine_root() -> str:
    """The folder that holds the `engine` package (a checkout or site-packages)."""
    return str(Path(engine.__file__).resolve().parents[1])


def python_command(*args: str) -> list[str]:
    """`sys.executable -P ARGS`: in the bundle sys.executable is the app, whose entry point
    answers the same flags (packaging/dist_entry.py)."""
    return [sys.executable, SAFE_PATH_FLAG, *args]


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a Python child: the engine importable by an absolute path, and no
    PYTHONPATH entry that means "the current directory" ("" or a relative path)."""
    env = dict(os.environ if base is None else base)
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isabs(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([engine_root(), *inherited]))
    env["PYTHONSAFEPATH"] = "1"
    return env


@contextmanager
def owned_cwd(prefix: str = "specprefill-child-") -> Iterator[str]:
    """A fresh private folder to start a child in, removed afterwards."""
    with TemporaryDirectory(prefix=prefix) as folder:
        yield folder
