"""`python -m engine.llama.rpc.memory_query HOST:PORT`: print [free, total] bytes of the worker's
first device as JSON. Run as a child process: ggml-rpc aborts the process if the worker fails."""

from __future__ import annotations

import json
import sys

from engine.llama.native import ensure_backend
from engine.llama.rpc.ggml_backends import add_server, device_memory


def main(endpoint: str) -> int:
    ensure_backend()
    devices = add_server(endpoint)
    print(json.dumps(list(device_memory(devices[0]))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
