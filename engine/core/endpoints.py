"""RPC worker endpoints ("HOST:PORT"), as the settings and `--rpc` take them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from engine.core.errors import SettingsError

DEFAULT_WORKER_PORT = 50052  # llama.cpp's rpc-server default
LOOPBACK = "127.0.0.1"
_HOST_PORT = re.compile(r"^\[?(?P<host>[^\[\]]+?)\]?:(?P<port>\d{1,5})$")


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    match = _HOST_PORT.match(text.strip())
    if not match:
        raise SettingsError(f"RPC worker {text.strip()!r} must be HOST:PORT, e.g. {LOOPBACK}:{DEFAULT_WORKER_PORT}")
    port = int(match["port"])
    if not 1 <= port <= 65535:
        raise SettingsError(f"RPC worker {text.strip()!r}: the port must be in [1, 65535]")
    return Endpoint(match["host"], port)


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """"HOST:PORT,HOST:PORT" → endpoints, in order; "" → none. A worker named twice is refused."""
    found = tuple(parse_endpoint(part) for part in text.split(",") if part.strip())
    repeated = sorted({str(e) for e in found if found.count(e) > 1})
    if repeated:
        raise SettingsError(f"RPC worker {repeated[0]} is listed twice")
    return found


def join_endpoints(endpoints: tuple[Endpoint, ...] | list[Endpoint]) -> str:
    return ",".join(str(e) for e in endpoints)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_split(text: str, n_workers: int) -> tuple[float, ...]:
    """An explicit layer split, local device first ("2,1,1"); "" → () (by free memory)."""
    if not text.strip():
        return ()
    try:
        weights = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise SettingsError(f"RPC split {text!r} must be numbers, the local device's first, e.g. 2,1,1") from None
    if len(weights) != n_workers + 1:
        raise SettingsError(f"RPC split {text!r} has {len(weights)} weights; it needs {n_workers + 1}: "
                            f"the local device's, then one per worker")
    if any(w < 0 for w in weights) or sum(weights[1:]) <= 0:
        raise SettingsError(f"RPC split {text!r}: weights must be >= 0, and the workers' must not all be 0")
    return weights
