"""Whether an address to listen on can be reached from other machines.

``berth serve`` in its noauth2 development mode and ``berth agent`` without a token trust every
caller, so both refuse such an address unless told otherwise.
"""

from __future__ import annotations

import ipaddress


def bind_host(bind: str) -> str:
    """The host part of ``host:port`` (``[::1]:8778`` included)."""
    return bind.rsplit(":", 1)[0].strip("[]")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
