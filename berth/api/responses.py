"""Response helpers shared by the handlers."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

import orjson

from berth.api.call import Call
from berth.api.microversion import CACHE_HEADERS
from berth.web.responses import Reply, http_date


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
