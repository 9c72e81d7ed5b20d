"""ggml-rpc through ggml's backend registry (the bindings: engine.llama.ggml_lib).

Only the host process (host.py) calls into ggml-rpc: a worker that stops answering aborts the
process that talks to it.
"""

from __future__ import annotations

import ctypes

from engine.core.errors import ModelError
from engine.llama.ggml_lib import ggml as _ggml
from engine.llama.ggml_lib import lib_dir

_ADD_SERVER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)


def has_rpc() -> bool:
    """Whether this llama.cpp build has the RPC backend (GGML_RPC=ON): its module in a
    GGML_BACKEND_DL build (registered only once native.ensure_backend ran), else built in."""
    return (lib_dir() / "libggml-rpc.so").is_file() or bool(_ggml().ggml_backend_reg_by_name(b"RPC"))


def add_server(endpoint: str) -> list[int]:
    """Register one worker's devices with ggml; returns their device handles.

    The worker must be reachable: ggml-rpc aborts the process when the connection fails, so
    callers probe it first (workers.require_reachable)."""
    ggml = _ggml()
    reg = ggml.ggml_backend_reg_by_name(b"RPC")
    if not reg:
        raise ModelError(
            "this llama.cpp build has no RPC backend: rebuild it with "
            "`python packaging/build_llama_wheel.py --install` (GGML_RPC=ON)"
        )
    add = _ADD_SERVER(ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server"))
    server_reg = add(endpoint.encode())
    if not server_reg:
        raise ModelError(f"RPC worker {endpoint} has no devices")
    ggml.ggml_backend_register(server_reg)
    return [
        ggml.ggml_backend_reg_dev_get(server_reg, i)
        for i in range(ggml.ggml_backend_reg_dev_count(server_reg))
    ]


def device_memory(device: int) -> tuple[int, int]:
    """(free, total) bytes of a device, as it reports them (a worker: what it lends)."""
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    _ggml().ggml_backend_dev_memory(device, ctypes.byref(free), ctypes.byref(total))
    return int(free.value), int(total.value)
