"""Response helpers shared by the handlers."""
from __future__ import annotations

import datetime
import email.utils
import time

import orjson
from werkzeug.http import HTTP_STATUS_CODES

JSON = "application/json"


class Reply:
    """A finished response, sent as it is: a status, a body and the headers to add.

    Werkzeug's Response re-checks and normalises every header on the way out; for the small answers
    of writes that was about a fifth of the application's CPU, spent on headers Berth writes itself.
    """

    __slots__ = ("status", "body", "content_type", "headers")

    def __init__(self, body: bytes = b"", status: int = 200, content_type: str | None = JSON, headers=None):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers: dict[str, str] = dict(headers) if headers else {}

    def __call__(self, environ, start_response):
        headers = [("Content-Type", self.content_type)] if self.content_type else []
        if self.status not in (204, 304):
            headers.append(("Content-Length", str(len(self.body))))
        headers.extend(self.headers.items())
        start_response(f"{self.status} {HTTP_STATUS_CODES.get(self.status, 'Unknown').upper()}", headers)
        if environ.get("REQUEST_METHOD") == "HEAD" or not self.body:
            return []
        return [self.body]


def json_response(call, body, status: int = 200, *, last_modified=None, headers=None) -> Reply:
    response = Reply(orjson.dumps(body), status)
    if call.version.at_least(15) and status in (200, 201):
        response.headers["cache-control"] = "no-cache"
        response.headers["last-modified"] = http_date(last_modified)
    if headers:
        response.headers.update(headers)
    return response


def location(call, path: str) -> str:
    """An absolute URL for a Location header, as the reference sends."""
    return call.request.root_url.rstrip("/") + path


def empty_response(status: int = 204, headers=None) -> Reply:
    return Reply(b"", status, content_type=None, headers=headers)


def http_date(moment=None) -> str:
    if moment is None:
        return email.utils.formatdate(time.time(), usegmt=True)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return email.utils.format_datetime(moment, usegmt=True)
