"""Placement's JSON error body.

Clients and the reference's tests read ``detail`` (Nova looks for "consumer generation conflict",
the CLI prints it), so the detail keeps the reference's shape: the status's standard explanation, a
blank line, then the specific message, folded into one line as WebOb folds it (``one_line``).
"""

from __future__ import annotations

import html
import re
from http import HTTPStatus

import orjson

from berth.domain import error_codes

EXPLANATIONS = {
    400: "The server could not comply with the request since it is either malformed or otherwise incorrect.",
    401: "This server could not verify that you are authorized to access the document you requested. "
    "Either you supplied the wrong credentials (e.g., bad password), or your browser does not "
    "understand how to supply the credentials required.",
    403: "Access was denied to this resource.",
    404: "The resource could not be found.",
    405: "The method specified is not allowed for this resource.",
    406: "The resource could not be generated that was acceptable to your browser.",
    409: "There was a conflict when trying to complete your request.",
    413: "The body of the request is too large.",
    415: "The request media type is not supported by this server.",
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


def html_body(status: int, detail: str) -> str:
    text = html.escape(detail or "")
    explanation = html.escape(EXPLANATIONS.get(status, title(status)))
    return (
        f"<html>\n <head>\n  <title>{status} {title(status)}</title>\n </head>\n <body>\n"
        f"  <h1>{status} {title(status)}</h1>\n  {explanation}<br /><br />\n{text}\n\n </body>\n</html>"
    )


def error_body(
    status: int,
    detail: str,
    *,
    code: str | None,
    request_id: str,
    include_code: bool,
    extra: dict[str, str] | None = None,
    explanation: str | None = None,
) -> bytes:
    explanation = explanation or EXPLANATIONS.get(status, title(status))
    error = {
        "status": status,
        "title": title(status),
        "detail": f"{explanation}\n\n {one_line(detail)}  " if detail else explanation,
        "request_id": request_id,
    }
    if include_code:
        error["code"] = code or error_codes.UNDEFINED
    if extra:
        error.update(extra)
    return orjson.dumps({"errors": [error]})
