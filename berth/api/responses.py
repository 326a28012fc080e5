"""Response helpers shared by the handlers."""
from __future__ import annotations

import datetime
import email.utils
import time

import orjson
from werkzeug.wrappers import Response

JSON = "application/json"


def json_response(call, body, status: int = 200, *, last_modified=None, headers=None) -> Response:
    response = Response(orjson.dumps(body), status=status, content_type=JSON)
    if call.version.at_least(15) and status in (200, 201):
        response.headers["cache-control"] = "no-cache"
        response.headers["last-modified"] = http_date(last_modified)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def location(call, path: str) -> str:
    """An absolute URL for a Location header, as the reference sends."""
    return call.request.root_url.rstrip("/") + path


def empty_response(status: int = 204, headers=None) -> Response:
    response = Response(status=status)
    response.headers.pop("Content-Type", None)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def http_date(moment=None) -> str:
    if moment is None:
        return email.utils.formatdate(time.time(), usegmt=True)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return email.utils.format_datetime(moment, usegmt=True)
