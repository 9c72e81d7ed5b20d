"""Where llama-cpp-python keeps its native libraries, and ctypes bindings to ggml's backend
registry that it does not bind (the CPU variants, engine.llama.cpu_backend; RPC, rpc/)."""

from __future__ import annotations

import ctypes
import os
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from engine.core.errors import ModelError


def lib_dir() -> Path:
    """Where the installed llama-cpp-python keeps its native libraries (and our RPC worker), found
    without importing it: the app's settings ask for workers long before a model loads."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")  # llama-cpp-python's own override
    if override:
        return Path(override)
    spec = find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise ModelError("llama-cpp-python is not installed: run `make setup`")
    return Path(spec.origin).parent / "lib"


# The soname llama.cpp links first: the very file libllama loaded, so one ggml registry, not two copies.
GGML_NAMES = ("libggml.so.0", "libggml.so", "libggml.dylib", "ggml.dll")


@cache
def ggml() -> ctypes.CDLL:
    """libggml, bound for the calls llama-cpp-python does not bind."""
    found = [lib_dir() / name for name in GGML_NAMES if (lib_dir() / name).is_file()]
    if not found:
        raise ModelError(f"no ggml library in {lib_dir()}: reinstall llama.cpp with `make setup`")
    lib = ctypes.CDLL(str(found[0]))
    lib.ggml_backend_reg_by_name.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_reg_by_name.restype = ctypes.c_void_p
    lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    lib.ggml_backend_register.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_register.restype = None
    lib.ggml_backend_reg_dev_count.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_reg_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_reg_dev_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.ggml_backend_reg_dev_get.restype = ctypes.c_void_p
    lib.ggml_backend_dev_memory.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.ggml_backend_dev_memory.restype = None
    lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_load.restype = ctypes.c_void_p
    return lib
