"""Placement's error bodies: JSON, and the HTML page and plain text it answers a client that does
not take JSON.

Clients and the reference's tests read ``detail`` (Nova looks for "consumer generation conflict",
the CLI prints it), so the detail keeps the reference's shape: WebOb's page for the status
(``stock_page``: the status's standard explanation, a blank line, then the specific message), folded
into one line as WebOb folds it (``one_line``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

import orjson
from werkzeug.datastructures import MIMEAccept

from berth.domain import error_codes
from berth.web.responses import JSON

EXPLANATIONS = {
    400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
    401: "This server could not verify that you are authorized to access the document you requested. "
    "Either you supplied the wrong credentials (e.g., bad password), or your browser does not "
    "understand how to supply the credentials required.",
    403: "Access was denied to this resource.",
    404: "The resource could not be found.",
    409: "There was a conflict when trying to complete your request.",
    413: "The body of the request is too large.",
    500: "The server has either erred or is incapable of performing the requested operation.",
    503: "The server is currently unavailable. Please try again at a later time.",
}


_BREAK = re.compile(r"<br.*?>", re.IGNORECASE | re.DOTALL)
_COMMENT_MARK = re.compile(r"<!--|-->")
_TAG = re.compile(r"<.*?>", re.DOTALL)


def one_line(message: str) -> str:
    """``message`` as the reference's JSON errors carry it: WebOb turns line breaks into spaces and
    strips markup.  Clients show the detail's last line only (osc prints ``... (HTTP 400)``), so a
    message of several lines, such as jsonschema's, would show as its last line alone."""
    message = message.replace("\n", " ").replace("\r", "")
    if "<" in message:
        message = _TAG.sub("", _COMMENT_MARK.sub("", _BREAK.sub("\n", message)))
    return message


def title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def stock_page(status: int, detail: str, environ: Mapping[str, Any], escape: Callable[[str], str] = str) -> str:
    """WebOb's page for ``status`` with markup, its parts escaped by ``escape``: the standard
    explanation and ``detail``, or for 405, 406 and 415 a sentence naming the request's method,
    ``Accept`` or ``Content-Type`` (WebOb's own templates for those, read from ``environ``), and each
    template's own spacing, which the detail keeps."""
    if status == 405:
        method = escape(environ.get("REQUEST_METHOD", ""))
        return f"The method {method} is not allowed for this resource. <br /><br />\n{escape(detail)}"
    if status == 406:
        # Placement's request log middleware sets a missing or "*/*" Accept to JSON before any handler.
        accept = environ.get("HTTP_ACCEPT") or JSON
        accept = escape(JSON if accept == "*/*" else accept)
        return (
            "The resource could not be generated that was acceptable to your browser\n"
            f"(content of type {accept}. <br /><br />\n{escape(detail)}"
        )
    if status == 415:
        # Placement names a missing media type "None", in this sentence too.
        media_type = escape(environ.get("CONTENT_TYPE") or "None")
        return f"The request media type {media_type} is not supported by this server.\n<br /><br />\n{escape(detail)}"
    return f"{escape(EXPLANATIONS.get(status, title(status)))}<br /><br />\n{escape(detail)}\n\n"


def html_body(status: int, detail: str, environ: Mapping[str, Any]) -> str:
    page = stock_page(status, detail, environ, _html_escape)
    return (
        f"<html>\n <head>\n  <title>{status} {title(status)}</title>\n </head>\n <body>\n"
        f"  <h1>{status} {title(status)}</h1>\n  {page}\n </body>\n</html>"
    )


def plain_body(status: int, detail: str, environ: Mapping[str, Any]) -> str:
    """The error as plain text, for a client that takes neither JSON nor HTML (WebOb's answer then)."""
    return f"{status} {title(status)}\n\n{one_line(stock_page(status, detail, environ))}"


def error_media_type(accept: MIMEAccept) -> str | None:
    """The form WebOb answers an error in for ``accept``: ``text/html``, JSON, or None for plain text.

    Each form counts at the quality of the most specific range it matches, and a tie goes to the
    page, the first that WebOb offers: ``application/json, text/html`` or ``application/xml,
    */*;q=0.1`` get the page (Werkzeug's ``best_match`` would take JSON, the more specific range or the
    first offer)."""
    qualities = {offer: accept.quality(offer) for offer in ("text/html", JSON)}
    taken = max(qualities, key=qualities.__getitem__)
    return taken if qualities[taken] > 0 else None


def webob_json_body(status: int, environ: Mapping[str, Any]) -> bytes:
    """WebOb's own JSON error, without a detail: what Placement answers where its error formatter does
    not reach (the 401 of its authentication middleware, outside its microversion middleware)."""
    return orjson.dumps(
        {"message": stock_page(status, "", environ), "code": f"{status} {title(status)}", "title": title(status)}
    )


def _html_escape(text: str) -> str:
    # As WebOb escapes: quotes too, and whatever is not ASCII as a character reference.
    return html.escape(text).encode("ascii", "xmlcharrefreplace").decode("ascii")


def error_body(
    status: int,
    detail: str,
    *,
    code: str | None,
    request_id: str,
    include_code: bool,
    environ: Mapping[str, Any],
    extra: dict[str, str] | None = None,
) -> bytes:
    error = {
        "status": status,
        "title": title(status),
        "detail": one_line(stock_page(status, detail, environ)),
        "request_id": request_id,
    }
    if include_code:
        error["code"] = code or error_codes.UNDEFINED
    if extra:
        error.update(extra)
    return orjson.dumps({"errors": [error]})
