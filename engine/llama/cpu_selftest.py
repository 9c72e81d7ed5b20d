"""The CPU variant's self-test, run in a child process by engine.llama.cpu_backend.

Loads one CPU variant, decodes a short batch of the model with extra buffer types off, then on,
and prints one JSON line: {"same": bool}. A crash kills only this child. Set
SPECPREFILL_SELFTEST_CRASH=1 to make it die of SIGSEGV (the tests' stand-in for an AMX machine).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

CRASH_ENV = "SPECPREFILL_SELFTEST_CRASH"
N_TOKENS = 16


def last_logits_argmax(model_path: Path, extra_bufts: bool) -> int:
    import numpy as np

    from engine.llama.native import LlamaContext, LlamaModel

    model = LlamaModel(model_path, use_extra_bufts=extra_bufts)
    try:
        context = LlamaContext(model, n_ctx=64, n_batch=N_TOKENS, n_threads=os.cpu_count() or 1)
        try:
            tokens = np.array(
                [(7 * i + 11) % max(model.n_vocab - 1, 1) for i in range(N_TOKENS)], dtype=np.int32
            )
            if context.decode(tokens, np.arange(N_TOKENS, dtype=np.int32), True) != 0:
                raise RuntimeError("decode failed")
            return int(np.argmax(context.last_logits()))
        finally:
            context.close()
    finally:
        model.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="the libggml-cpu-<variant>.so to test")
    parser.add_argument("--model", type=Path, required=True, help="a GGUF model to decode with")
    args = parser.parse_args(argv)
    from engine.llama import cpu_backend, native

    cpu_backend.load_backends(args.library, args.library.parent)
    native.mark_backend_loaded()
    reference = last_logits_argmax(args.model, extra_bufts=False)
    if os.environ.get(CRASH_ENV) == "1":
        os.kill(os.getpid(), signal.SIGSEGV)
    tested = last_logits_argmax(args.model, extra_bufts=True)
    print(json.dumps({"same": reference == tested, "reference": reference, "tested": tested}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
