"""RPC worker endpoints ("HOST:PORT"), as the settings and `--rpc` take them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from engine.core.errors import SettingsError

DEFAULT_WORKER_PORT = 50052  # llama.cpp's rpc-server default
LOOPBACK = "127.0.0.1"
_BRACKETED = re.compile(r"^\[(?P<host>[^\[\]]+)\]:(?P<port>\d{1,5})$")  # [IPv6]:PORT, as in URLs
_PLAIN = re.compile(r"^(?P<host>[^\[\]:\s]+):(?P<port>\d{1,5})$")  # HOST:PORT, no colon in HOST


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """ "HOST:PORT" or "[IPv6]:PORT" (the form URLs use). A bare IPv6 address with a port, such as
    "::1:50052", is refused: its last group could be the port or part of the address."""
    text = text.strip()
    match = _BRACKETED.match(text) or _PLAIN.match(text)
    if not match:
        raise SettingsError(_unparsable_message(text))
    host, port = match["host"], int(match["port"])
    if match.re is _BRACKETED and not _is_ipv6(host):
        raise SettingsError(f"RPC worker {text!r}: only an IPv6 address goes in brackets")
    if not 1 <= port <= 65535:
        raise SettingsError(f"RPC worker {text!r}: the port must be in [1, 65535]")
    return Endpoint(host, port)


def _unparsable_message(text: str) -> str:
    address, _, port = text.rpartition(":")
    if _is_ipv6(address) and port.isdigit():
        return f"RPC worker {text!r} is ambiguous: write an IPv6 address in brackets, [{address}]:{port}"
    return f"RPC worker {text!r} must be HOST:PORT or [IPv6]:PORT, e.g. {LOOPBACK}:{DEFAULT_WORKER_PORT}"


def _is_ipv6(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False


def with_default_port(text: str) -> str:
    """A bare host ("10.0.0.5", "::1", "[::1]") gets the port workers listen on by default;
    anything else is left as typed."""
    text = text.strip()
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if _is_ipv6(bare):
        return str(Endpoint(bare, DEFAULT_WORKER_PORT))
    return f"{text}:{DEFAULT_WORKER_PORT}" if text and ":" not in text else text


def worker_start_command(endpoint: Endpoint | None = None) -> str:
    """The command that starts a worker the app reaches at `endpoint`. A worker binds 127.0.0.1
    unless --host names another address, so one on another machine needs its own address there."""
    if endpoint is None:
        return f"specprefill worker --host <that machine's address> --port {DEFAULT_WORKER_PORT}"
    host = "" if endpoint.host == LOOPBACK else f" --host {endpoint.host}"
    return f"specprefill worker{host} --port {endpoint.port}"


def parse_endpoints(text: str) -> tuple[Endpoint, ...]:
    """ "HOST:PORT,HOST:PORT" → endpoints, in order; "" → none. A worker named twice is refused."""
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
        raise SettingsError(
            f"RPC split {text!r} must be numbers, the local device's first, e.g. 2,1,1"
        ) from None
    if len(weights) != n_workers + 1:
        raise SettingsError(
            f"RPC split {text!r} has {len(weights)} weights; it needs {n_workers + 1}: "
            f"the local device's, then one per worker"
        )
    if any(w < 0 for w in weights) or sum(weights[1:]) <= 0:
        raise SettingsError(f"RPC split {text!r}: weights must be >= 0, and the workers' must not all be 0")
    return weights
