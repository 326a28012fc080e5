"""JSON over HTTP for Berth's clients of its own services (the service, the agents, the conductors),
on libcurl (through pycurl) with kept-alive connections.

Why libcurl: a conductor makes several calls per server operation, to the service and to the agents,
and the client's own CPU per call is taken from the control plane's. Measured on these machines
against the service's ``GET /allocations/{consumer}``, one thread, a kept-alive connection: urllib3's
connection pool spent 0.26 ms of the client's CPU per call, libcurl 0.07 ms (a requests ``Session``
costs about twice urllib3's pool). None of what the larger clients add is used here: no cookies, no
redirects, no authentication but a header, and no proxy (the environment's proxy settings are
switched off for these clients, whose peers are inside the cloud).

A libcurl handle is one connection's worth of state and is not for two threads at once: a client
takes an idle handle of its server's address for each call and gives it back after
(``ConnectionPools``), so that one client serves any number of threads and the clients of many hosts
behind one address (the simulator's pooled hosts) share their connections.

A call that gets no answer (refused, reset, timed out) raises ``TransportError``; any answer,
error statuses included, is returned as an ``Answer`` for the client to read. libcurl sends a
request once more on a new connection when a kept-alive one turns out to have been closed by the
server without a byte of answer (the server's keep-alive timeout ran out as the request left): such a
request is counted as sent, so that a refusal of the second connection is a ``TransportError`` and
never a ``NotConnected``.
"""

from __future__ import annotations

import io
import os
import select
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import orjson
import pycurl

from berth.clients import request_ids

__all__ = [
    "Answer",
    "ConnectionPools",
    "JsonHttp",
    "NotConnected",
    "ReadTimedOut",
    "TransportError",
    "connection_pools",
    "perform",
]

# Connections kept open to one server: one per thread of a conductor or agent that calls at once
# (more are opened when needed, and closed after use rather than kept).
CONNECTIONS_PER_SERVER: Final = 32
# libcurl's codes for a connection that could not be made.
_NOT_CONNECTED: Final = frozenset(
    {pycurl.E_COULDNT_CONNECT, pycurl.E_COULDNT_RESOLVE_HOST, pycurl.E_COULDNT_RESOLVE_PROXY}
)
# Methods whose requests carry a length even when they have no body (as other clients send them).
_WRITES: Final = frozenset({"POST", "PUT", "PATCH"})


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


def perform(
    handle: pycurl.Curl,
    method: str,
    url: str,
    payload: bytes | None,
    header_lines: list[str],
    timeout: float,
    head: io.BytesIO | None = None,
) -> Answer:
    """One request on ``handle`` (its kept-alive connection is used again when it has one); the
    answer's header lines are written to ``head`` when one is given. ``TransportError`` when no
    answer came."""
    fresh = _closed_by_server(handle)  # read before the reset, which forgets the connection
    handle.reset()  # every option back to its default; the handle's connections stay
    if fresh:
        handle.setopt(pycurl.FRESH_CONNECT, 1)
    handle.setopt(pycurl.NOSIGNAL, 1)
    handle.setopt(pycurl.PROXY, "")
    milliseconds = max(1, int(timeout * 1000))
    handle.setopt(pycurl.CONNECTTIMEOUT_MS, milliseconds)
    handle.setopt(pycurl.TIMEOUT_MS, milliseconds)
    handle.setopt(pycurl.URL, url)
    lines = list(header_lines)
    if payload is not None:
        lines.append("Content-Type: application/json")
    elif method in _WRITES:
        payload = b""
        lines.append("Content-Type:")  # none, rather than libcurl's form encoding
    if payload is not None:
        handle.setopt(pycurl.POSTFIELDSIZE, len(payload))
        handle.setopt(pycurl.POSTFIELDS, payload)
    if method == "HEAD":
        handle.setopt(pycurl.NOBODY, 1)
    elif method != "GET":
        # After POSTFIELDS, which makes a POST: the method named is the one sent, with the body.
        handle.setopt(pycurl.CUSTOMREQUEST, method)
    # "Expect: 100-continue" would cost a round trip (and libcurl's wait) for larger bodies.
    lines.append("Expect:")
    handle.setopt(pycurl.HTTPHEADER, lines)
    body = io.BytesIO()
    handle.setopt(pycurl.WRITEDATA, body)
    if head is not None:
        handle.setopt(pycurl.HEADERFUNCTION, head.write)
    try:
        handle.perform()
    except pycurl.error as error:
        code, message = error.args[0], error.args[-1]
        errno = handle.getinfo(pycurl.OS_ERRNO)
        if errno:  # the system's word for it ("Connection refused"), which libcurl's message leaves out
            message = f"{message} ({os.strerror(errno)})"
        sent = handle.getinfo(pycurl.REQUEST_SIZE) > 0
        where = f"{method} {url}: {message}"
        if not sent and (code in _NOT_CONNECTED or code == pycurl.E_OPERATION_TIMEDOUT):
            raise NotConnected(where) from None
        if code == pycurl.E_OPERATION_TIMEDOUT:
            raise ReadTimedOut(where) from None
        raise TransportError(where) from None
    return Answer(handle.getinfo(pycurl.RESPONSE_CODE), body.getvalue())


class ConnectionPools:
    """Idle libcurl handles by server address (scheme, host and port), each holding its kept-alive
    connection: a call takes one (or a new one) and gives it back after, up to ``per_server`` kept."""

    def __init__(self, per_server: int = CONNECTIONS_PER_SERVER):
        self.per_server = per_server
        self._idle: dict[str, list[pycurl.Curl]] = {}
        self._lock = threading.Lock()

    def take(self, origin: str) -> pycurl.Curl:
        with self._lock:
            idle = self._idle.get(origin)
            if idle:
                return idle.pop()
        return pycurl.Curl()

    def give(self, origin: str, handle: pycurl.Curl) -> None:
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if len(idle) < self.per_server:
                idle.append(handle)
                return
        handle.close()


def _closed_by_server(handle: pycurl.Curl) -> bool:
    """Whether the kept connection of ``handle`` has something to read while no request is out:
    the server closed it (its keep-alive ran out, or its process died), and the next request goes
    on a new connection. libcurl checks that itself only for connections idle for a while, and
    otherwise sends the request on the dead connection, then once more on a new one: a refusal of
    that one could no longer be told from a request the server took and died on, which is what
    ``NotConnected`` must never be. Every caller of ``perform`` gets the check (the load tools'
    client keeps one handle per thread, outside ``ConnectionPools``)."""
    socket = handle.getinfo(pycurl.ACTIVESOCKET)
    if socket < 0:
        return False
    poll = select.poll()
    poll.register(socket, select.POLLIN)
    return bool(poll.poll(0))


def connection_pools() -> ConnectionPools:
    """Pools of connections that several clients may share (the clients of many hosts behind one
    address, as the simulator's pooled hosts are)."""
    return ConnectionPools()


class JsonHttp:
    """Calls to one server (``base_url``), each with ``headers`` (the dict itself is kept: a change
    to it applies to the calls after), a JSON body when one is given, and ``timeout`` seconds to
    connect and to have the whole answer."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str] | None = None,
        *,
        timeout: float = 30.0,
        pools: ConnectionPools | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.headers: dict[str, str] = headers if headers is not None else {}
        self.timeout = timeout
        parts = urlsplit(self.base_url)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._pools = pools or connection_pools()

    def request(
        self, method: str, path: str, body: object = None, *, params: Mapping[str, str] | None = None
    ) -> Answer:
        url = self.base_url + path
        if params:
            url += ("&" if "?" in url else "?") + urlencode(params)
        payload = None if body is None else orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
        lines = [f"{name}: {value}" for name, value in self.headers.items()]
        carried = request_ids.CARRIED.get()
        if carried is not None:
            lines.append(f"{request_ids.HEADER}: {carried}")
        handle = self._pools.take(self._origin)
        try:
            answer = perform(handle, method, url, payload, lines, self.timeout)
        except TransportError:
            handle.close()  # its connection is in doubt
            raise
        self._pools.give(self._origin, handle)
        return answer
