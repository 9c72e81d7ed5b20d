"""RPC worker addresses: IPv6 in brackets as URLs write it, the ambiguous bare form refused with the
fix, and the hint for starting a worker names the address that worker must bind."""

from __future__ import annotations

import pytest

from engine.core.endpoints import (
    DEFAULT_WORKER_PORT,
    Endpoint,
    parse_endpoint,
    with_default_port,
    worker_start_command,
)
from engine.core.errors import SettingsError


@pytest.mark.parametrize(
    "text, host, port",
    [
        ("[::1]:50052", "::1", 50052),
        ("[fe80::1%eth0]:7", "fe80::1%eth0", 7),
        ("[2001:db8::2]:50052", "2001:db8::2", 50052),
        ("127.0.0.1:50052", "127.0.0.1", 50052),
        ("localhost:9", "localhost", 9),
        ("gpu-box.lan:50052", "gpu-box.lan", 50052),
    ],
)
def test_addresses_parse_as_urls_write_them(text, host, port):
    assert parse_endpoint(text) == Endpoint(host, port)
    assert parse_endpoint(str(Endpoint(host, port))) == Endpoint(host, port)  # round trip


@pytest.mark.parametrize("text", ["::1:50052", "2001:db8::2:50052", "fe80::1:7"])
def test_a_bare_ipv6_address_with_a_port_is_refused_with_the_bracketed_form(text):
    address, _, port = text.rpartition(":")
    with pytest.raises(SettingsError, match=rf"\[{address}\]:{port}"):
        parse_endpoint(text)


@pytest.mark.parametrize(
    "text",
    [
        "[::1]",
        "[not-an-address]:1",
        "[127.0.0.1]:1",
        "a b:1",
        "[::1]:0",
        "h:70000",
        "[::1]:50052]",
        "[[::1]]:1",
    ],
)
def test_malformed_addresses_are_refused(text):
    with pytest.raises(SettingsError):
        parse_endpoint(text)


def test_a_bare_host_gets_the_default_port_ipv6_in_brackets():
    assert with_default_port("10.0.0.5") == f"10.0.0.5:{DEFAULT_WORKER_PORT}"
    assert with_default_port("::1") == f"[::1]:{DEFAULT_WORKER_PORT}"
    assert with_default_port("[::1]") == f"[::1]:{DEFAULT_WORKER_PORT}"
    assert with_default_port("10.0.0.5:7") == "10.0.0.5:7"


def test_the_start_hint_binds_the_address_the_app_connects_to():
    """A worker binds 127.0.0.1 unless told otherwise: one on another machine needs its --host."""
    assert (
        worker_start_command(Endpoint("10.0.0.5", 50052)) == "specprefill worker --host 10.0.0.5 --port 50052"
    )
    assert worker_start_command(Endpoint("::1", 7)) == "specprefill worker --host ::1 --port 7"
    assert worker_start_command(Endpoint("127.0.0.1", 7)) == "specprefill worker --port 7"
    assert "--host" in worker_start_command()
