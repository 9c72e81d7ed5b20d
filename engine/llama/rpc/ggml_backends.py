"""ctypes bindings to ggml's backend registry: what llama-cpp-python does not bind.

Only the host process (host.py) calls into ggml-rpc: a worker that stops answering aborts the
process that talks to it.
"""

from __future__ import annotations

import ctypes
from functools import cache
from pathlib import Path

import llama_cpp.llama_cpp as L

from engine.core.errors import ModelError

_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)


def lib_dir() -> Path:
    """Where the installed llama-cpp-python keeps its native libraries (and our RPC worker)."""
    return Path(L._lib._name).parent


@cache
def _ggml() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(lib_dir() / "libggml.so"))
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
