"""JSON over HTTP for Berth's clients of its own services (the service, the agents, the conductors),
on urllib3's connection pools.

Why urllib3 and not a requests ``Session``: a call through a Session builds a prepared request,
merges the session's settings, cookies and hooks into it and builds a response object around
urllib3's; measured on these machines, that is about half of the CPU of a call (1.34 ms against
0.71 ms on urllib3's pool, on a loaded machine), and a conductor makes several calls per server
operation. None of what it adds is used here: no cookies, no redirects, no authentication but a
header, and no proxy (the environment's proxy settings were already switched off for these
clients, whose peers are inside the cloud).

A call that gets no answer (refused, reset, timed out) raises ``TransportError``; any answer,
error statuses included, is returned as an ``Answer`` for the client to read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode

import orjson
import urllib3

__all__ = ["Answer", "JsonHttp", "NotConnected", "ReadTimedOut", "TransportError", "connection_pools"]

# Connections kept open to one server: one per thread of a conductor or agent that calls at once
# (more are opened when needed, and closed after use rather than kept).
CONNECTIONS_PER_SERVER: Final = 32


class TransportError(OSError):
    """No answer: the connection was refused, reset or timed out. An ``OSError``, as the socket's own
    errors are, so that a caller that treats any I/O failure alike need not know this module."""


class NotConnected(TransportError):
    """The connection could not be made (refused, or not in time): nothing of the request was sent."""


class ReadTimedOut(TransportError):
    """The request was sent but no answer came in time: unlike a refused connection, the server may
    have acted on it."""


@dataclass(frozen=True)
class Answer:
    status: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body's JSON (ValueError when it is not JSON)."""
        return orjson.loads(self.content)


def connection_pools() -> urllib3.PoolManager:
    """Pools of connections that several clients may share (the clients of many hosts behind one
    address, as the simulator's pooled hosts are)."""
    return urllib3.PoolManager(num_pools=64, maxsize=CONNECTIONS_PER_SERVER)


class JsonHttp:
    """Calls to one server (``base_url``), each with ``headers`` (the dict itself is kept: a change
    to it applies to the calls after), a JSON body when one is given, and ``timeout`` seconds to
    connect and for each read."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str] | None = None,
        *,
        timeout: float = 30.0,
        pools: urllib3.PoolManager | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.headers: dict[str, str] = headers if headers is not None else {}
        self.timeout = timeout
        self._prefix = urllib3.util.parse_url(self.base_url).path or ""
        self._pool = (pools or connection_pools()).connection_from_url(self.base_url)

    def request(
        self, method: str, path: str, body: object = None, *, params: Mapping[str, str] | None = None
    ) -> Answer:
        target = self._prefix + path
        if params:
            target += ("&" if "?" in target else "?") + urlencode(params)
        headers = self.headers
        payload: bytes | None = None
        if body is not None:
            payload = orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
            headers = {**headers, "Content-Type": "application/json"}
        try:
            response = self._pool.urlopen(
                method, target, body=payload, headers=headers, timeout=self.timeout, retries=False, redirect=False
            )
        except (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError) as error:
            raise NotConnected(f"{method} {self.base_url}{path}: {error}") from error
        except urllib3.exceptions.ReadTimeoutError as error:
            raise ReadTimedOut(f"{method} {self.base_url}{path}: {error}") from error
        except urllib3.exceptions.HTTPError as error:
            raise TransportError(f"{method} {self.base_url}{path}: {error}") from error
        return Answer(response.status, response.data)
