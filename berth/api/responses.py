"""Response helpers shared by the handlers."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import orjson
from werkzeug.http import HTTP_STATUS_CODES

from berth.api.call import Call
from berth.api.microversion import CACHE_HEADERS

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

JSON = "application/json"


class Reply:
    """A finished response, sent as it is: a status, a body and the headers to add.

    Werkzeug's Response re-checks and normalises every header on the way out; for the small answers
    of writes that was about a fifth of the application's CPU, spent on headers Berth writes itself.
    """

    __slots__ = ("status", "body", "content_type", "headers")

    def __init__(
        self,
        body: bytes = b"",
        status: int = 200,
        content_type: str | None = JSON,
        headers: Mapping[str, str] | None = None,
    ):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers: dict[str, str] = dict(headers) if headers else {}

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        headers = [("Content-Type", self.content_type)] if self.content_type else []
        if self.status not in (204, 304):
            headers.append(("Content-Length", str(len(self.body))))
        headers.extend(self.headers.items())
        start_response(f"{self.status} {HTTP_STATUS_CODES.get(self.status, 'Unknown').upper()}", headers)
        if environ.get("REQUEST_METHOD") == "HEAD" or not self.body:
            return []
        return [self.body]


def json_response(
    call: Call,
    body: object,
    status: int = 200,
    *,
    last_modified: datetime.datetime | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """``body`` (anything orjson writes) as a JSON answer, with the cache headers of 1.15 on."""
    response = Reply(orjson.dumps(body), status)
    if call.version >= CACHE_HEADERS and status in (200, 201):
        response.headers["cache-control"] = "no-cache"
        response.headers["last-modified"] = http_date(last_modified)
    if headers:
        response.headers.update(headers)
    return response


# Root URLs by the parts of the request they are made of.  Werkzeug builds one through IRI and IDNA
# conversions, which cost a provider's creation more than its JSON did; a server sees few distinct
# roots, but the Host header is the client's, so the memo is bounded.
_ROOT_URLS: dict[tuple[object, ...], str] = {}
_MOST_ROOT_URLS = 256


def location(call: Call, path: str) -> str:
    """An absolute URL for a Location header, as the reference sends."""
    environ = call.request.environ
    key = (
        environ.get("wsgi.url_scheme"),
        environ.get("HTTP_HOST"),
        environ.get("SERVER_NAME"),
        environ.get("SERVER_PORT"),
        environ.get("SCRIPT_NAME"),
    )
    root = _ROOT_URLS.get(key)
    if root is None:
        if len(_ROOT_URLS) >= _MOST_ROOT_URLS:
            _ROOT_URLS.clear()
        root = _ROOT_URLS[key] = call.request.root_url.rstrip("/")
    return root + path


def link(call: Call, path: str) -> str:
    """The href of a link to ``path``: under the path the service is mounted at (``SCRIPT_NAME``,
    ``/placement`` in most clouds), relative to the host, as the reference writes it."""
    prefix: str = call.request.environ.get("SCRIPT_NAME", "")
    return prefix + path


def empty_response(status: int = 204, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(b"", status, content_type=None, headers=headers)


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def http_date(moment: datetime.datetime | None = None) -> str:
    """``moment`` (naive means UTC; default now) as an HTTP date, ``Sun, 06 Nov 1994 08:49:37 GMT``.

    The same text as ``email.utils.format_datetime(usegmt=True)``, written directly: most answers
    carry one, and the generic formatter cost several times as much.
    """
    if moment is None:
        moment = datetime.datetime.now(datetime.UTC)
    elif moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC)
    return (
        f"{_WEEKDAYS[moment.weekday()]}, {moment.day:02d} {_MONTHS[moment.month - 1]} "
        f"{moment.year:04d} {moment.hour:02d}:{moment.minute:02d}:{moment.second:02d} GMT"
    )
