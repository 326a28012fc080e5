"""One client of a Placement server, for the tools that drive it and the tests that check it live.

It speaks the service's conventions (token, microversion header, JSON bodies) and keeps one
connection per thread, so that one client serves a pool of threads.  It sends a request one of two
ways, chosen by what the caller needs:

* libcurl through pycurl on a kept-alive HTTP/1.1 connection (the default).  A load generator shares
  the machine's cores with the server under test, so its own cost per request is taken from the
  server's: ``requests`` spends about a millisecond of Python per call, ``http.client`` on a
  kept-alive connection about 260 µs of CPU, libcurl about 110 µs.  libcurl sends a request once more
  on a new connection when a reused one turns out to have been closed by the server before it
  answered (the keep-alive timeout ran out between two requests).
* ``requests`` (``at_most_once=True``), which never sends a request twice: a write that fails is then
  either refused (the connection was never made) or uncertain, never applied twice behind the
  caller's back.  ``berth stress`` logs every write under that rule.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import orjson
import pycurl
import requests

from berth.clients.http import NotConnected, ReadTimedOut, TransportError, perform
from berth.clients.placement import SERVICE_ROLES
from berth.testbed.errors import ApiError

TOKEN = "admin"  # the noauth2 development mode's admin
# The tools drive the service as its services do (the scheduler, the conductors, the agents): with a
# service user's roles, said in X-Roles for the noauth2 development mode (berth.clients.placement).
ROLES = SERVICE_ROLES
VERSION = "1.39"


class Response:
    """Status, body and headers (names in lower case) of one answer."""

    __slots__ = ("status_code", "content", "_headers", "_raw_headers")

    def __init__(
        self, status_code: int, content: bytes, headers: dict[str, str] | None = None, raw_headers: bytes = b""
    ):
        self.status_code = status_code
        self.content = content
        self._headers = headers
        self._raw_headers = raw_headers

    @property
    def headers(self) -> dict[str, str]:
        if self._headers is None:
            self._headers = _parse_headers(self._raw_headers)
        return self._headers

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return orjson.loads(self.content)


def _parse_headers(raw: bytes) -> dict[str, str]:
    """The header lines of the last response in ``raw`` (libcurl also hands over those of a retry)."""
    headers: dict[str, str] = {}
    for line in raw.decode("latin-1").split("\r\n"):
        if line.startswith("HTTP/"):
            headers = {}
        elif ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return headers


def error_code(response: Response) -> str | None:
    """The ``code`` of the first error in a Placement error body, if there is one."""
    try:
        code = response.json()["errors"][0].get("code")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return code if isinstance(code, str) else None


class RequestFailed(ConnectionError):
    """No answer.  ``sent`` is False when the connection was never made, so the server cannot have
    seen the request; ``connection`` is False for a timeout or a broken answer on a live connection."""

    def __init__(self, message: str, *, sent: bool, connection: bool = True):
        super().__init__(message)
        self.sent = sent
        self.connection = connection


class _Connection(Protocol):
    def send(self, method: str, url: str, payload: bytes | None, headers: Mapping[str, str]) -> Response: ...

    def close(self) -> None: ...


class _CurlConnection:
    def __init__(self, timeout: float):
        self.timeout = timeout
        self.curl = pycurl.Curl()

    def send(self, method: str, url: str, payload: bytes | None, headers: Mapping[str, str]) -> Response:
        head = io.BytesIO()
        lines = [f"{k}: {v}" for k, v in headers.items()]
        try:
            answer = perform(self.curl, method, url, payload, lines, self.timeout, head)
        except TransportError as error:
            sent = not isinstance(error, NotConnected)
            raise RequestFailed(str(error), sent=sent, connection=not isinstance(error, ReadTimedOut)) from None
        return Response(answer.status, answer.content, raw_headers=head.getvalue())

    def close(self) -> None:
        self.curl.close()


class _RequestsConnection:
    def __init__(self, timeout: float):
        self.timeout = timeout
        self.session = requests.Session()
        # No proxies, no .netrc: the traffic must stay on the loopback interface.
        self.session.trust_env = False

    def send(self, method: str, url: str, payload: bytes | None, headers: Mapping[str, str]) -> Response:
        if payload is not None:
            headers = {**headers, "Content-Type": "application/json"}
        try:
            r = self.session.request(method, url, data=payload, headers=headers, timeout=self.timeout)
        except requests.RequestException as e:
            raise RequestFailed(
                f"{type(e).__name__}: {e}",
                sent=not _refused_before_sending(e),
                connection=isinstance(e, requests.ConnectionError),
            ) from e
        return Response(r.status_code, r.content, {k.lower(): v for k, v in r.headers.items()})

    def close(self) -> None:
        self.session.close()


def _refused_before_sending(error: BaseException) -> bool:
    """True when the TCP connection was never established, so the server cannot have seen the request.

    requests wraps urllib3's MaxRetryError, whose ``reason`` is the NewConnectionError (connection
    refused) or ConnectTimeoutError; anything else (reset, closed mid-response) may have been processed.
    """
    pending: list[Any] = [error]
    seen: set[int] = set()
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError) or type(e).__name__ in ("NewConnectionError", "ConnectTimeoutError"):
            return True
        pending += [
            getattr(e, "reason", None),
            e.__cause__,
            e.__context__,
            *(a for a in e.args if isinstance(a, BaseException)),
        ]
    return False


class Client:
    """Requests to one server with one token, roles (``X-Roles``; ``()`` for none) and microversion;
    one connection per calling thread."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        token: str = TOKEN,
        roles: Iterable[str] = ROLES,
        version: str = VERSION,
        at_most_once: bool = False,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.version = version
        self.at_most_once = at_most_once
        self.headers = {
            "X-Auth-Token": token,
            "OpenStack-API-Version": f"placement {version}",
            "Accept": "application/json",
        }
        roles = tuple(roles)
        if roles:
            self.headers["X-Roles"] = ",".join(roles)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[_Connection] = []

    def _connection(self) -> _Connection:
        connection: _Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = _RequestsConnection(self.timeout) if self.at_most_once else _CurlConnection(self.timeout)
            self._local.connection = connection
            with self._lock:
                self._open.append(connection)
        return connection

    def request(self, method: str, path: str, body: Any = None, *, version: str | None = None) -> Response:
        """The answer, whatever its status; :class:`RequestFailed` when there is none."""
        headers = self.headers
        if version is not None and version != self.version:
            headers = {**headers, "OpenStack-API-Version": f"placement {version}"}
        payload = None if body is None else orjson.dumps(body)
        return self._connection().send(method, self.base_url + path, payload, headers)

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def call(
        self, method: str, path: str, body: Any = None, *, version: str | None = None, expect: Iterable[int] = (200,)
    ) -> Any:
        """The decoded body (None when empty); :class:`ApiError` for a status not in ``expect``."""
        r = self.request(method, path, body, version=version)
        if r.status_code not in expect:
            raise ApiError(method, path, r.status_code, r.text)
        return r.json() if r.content else None

    def get_retrying(self, path: str, timeout: float = 60.0) -> Any:
        """GET that waits out a server or database that is still coming back (503, no connection)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                r = self.get(path)
                if r.status_code == 200:
                    return r.json()
                if r.status_code != 503 or time.monotonic() > deadline:
                    raise ApiError("GET", path, r.status_code, r.text)
            except RequestFailed:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def answers(self) -> bool:
        """Whether the server answers its root document."""
        try:
            return self.get("/").status_code == 200
        except RequestFailed:
            return False

    def close_thread(self) -> None:
        """Close the calling thread's connection (a thread of a pool that is done)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            self._local.connection = None
            with self._lock:
                if connection not in self._open:
                    return  # close() took it already
                self._open.remove(connection)
            connection.close()

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            connections, self._open = self._open, []
        for connection in connections:
            connection.close()
        self._local = threading.local()
