"""Whether an address to listen on can be reached from other machines, and how the services
identify their callers.

``berth serve`` in its noauth2 development mode and ``berth agent`` without a token trust every
caller, so both refuse such an address unless told otherwise.
"""

from __future__ import annotations

import ipaddress
from typing import Final

# How ``berth serve`` and ``berth conductor`` identify callers (``--auth-strategy``): here, so that
# the conductor's command does not import the service's modules to name them.
AUTH_STRATEGIES: Final = ("noauth2", "tokens", "keystone")


def bind_host(bind: str) -> str:
    """The host part of ``host:port`` (``[::1]:8778`` included)."""
    return bind.rsplit(":", 1)[0].strip("[]")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
