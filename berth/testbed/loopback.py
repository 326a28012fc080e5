"""The loopback interface, the only one the tools send requests to or listen on."""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse

from berth.testbed.errors import TestbedError


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago (another process may still take it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def loopback_url(url: str) -> str:
    """The URL without its trailing slash; a :class:`TestbedError` unless it names a loopback address."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TestbedError(f"--url must look like http://127.0.0.1:PORT, got {url!r}")
    host = parts.hostname
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise TestbedError(f"--url must point at the loopback interface (127.0.0.1), got host {host!r}")
    return url.rstrip("/")
