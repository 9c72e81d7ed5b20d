"""ctypes bindings to ggml's backend registry: what llama-cpp-python does not bind.

Only the host process (host.py) calls into ggml-rpc: a worker that stops answering aborts the
process that talks to it.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from engine.core.errors import ModelError

_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)


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
def _ggml() -> ctypes.CDLL:
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
    lib.ggml_backend_dev_memory.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                                            ctypes.POINTER(ctypes.c_size_t)]
    lib.ggml_backend_dev_memory.restype = None
    return lib


def has_rpc() -> bool:
    """Whether this llama.cpp build has the RPC backend (GGML_RPC=ON)."""
    return bool(_ggml().ggml_backend_reg_by_name(b"RPC"))


def add_server(endpoint: str) -> list[int]:
    """Register one worker's devices with ggml; returns their device handles.

    The worker must be reachable: ggml-rpc aborts the process when the connection fails, so
    callers probe it first (workers.require_reachable)."""
    ggml = _ggml()
    reg = ggml.ggml_backend_reg_by_name(b"RPC")
    if not reg:
        raise ModelError("this llama.cpp build has no RPC backend: rebuild it with "
                         "`python packaging/build_llama_wheel.py --install` (GGML_RPC=ON)")
    add = _ADD_SERVER(ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server"))
    server_reg = add(endpoint.encode())
    if not server_reg:
        raise ModelError(f"RPC worker {endpoint} has no devices")
    ggml.ggml_backend_register(server_reg)
    return [ggml.ggml_backend_reg_dev_get(server_reg, i) for i in range(ggml.ggml_backend_reg_dev_count(server_reg))]


def device_memory(device: int) -> tuple[int, int]:
    """(free, total) bytes of a device, as it reports them (a worker: what it lends)."""
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    _ggml().ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value)
