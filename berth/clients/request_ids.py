"""The request id the calls to the service and the agents carry: that of the request (or the
operation it started) they are made for, sent as ``X-Openstack-Request-Id``, which the service and
the agents log as ``global_request_id`` (docs/operations.md). One request to the conductors can
then be followed through the service's and the agents' logs, as Nova passes its request's global
id to Placement."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Final

HEADER: Final = "X-Openstack-Request-Id"

# Set around the work done for one request, in the thread doing it (an operation's thread copies it).
CARRIED: ContextVar[str | None] = ContextVar("berth_carried_request_id", default=None)


@contextlib.contextmanager
def carrying(request_id: str | None) -> Iterator[None]:
    """The calls made within carry ``request_id`` (none when it is None)."""
    token = CARRIED.set(request_id)
    try:
        yield
    finally:
        CARRIED.reset(token)
