"""Checks every request of Berth's HTTP services passes before it is routed."""

from __future__ import annotations

from typing import Final

from werkzeug.wrappers import Request

from berth.domain.errors import BerthError

# The largest body a service reads; Werkzeug refuses a longer one as it reads it.
MAX_BODY_BYTES: Final = 8 * 1024 * 1024


def refuse_nul_characters(request: Request) -> None:
    """No identifier or name may hold a NUL: PostgreSQL cannot store one, and no client needs it."""
    if (
        "\x00" in request.path
        or "%00" in request.query_string.decode("latin-1")
        or "\x00" in request.query_string.decode("latin-1")
    ):
        raise BerthError("NUL characters are not allowed in the request.", status=400)


def refuse_undecodable_query(request: Request) -> None:
    """A query string must be UTF-8 (its percent-escapes aside, which decode with replacement): the
    parameters of one that is not cannot be read."""
    try:
        request.query_string.decode()
    except UnicodeDecodeError as error:
        raise BerthError(
            f"The query string is not UTF-8: byte {error.object[error.start]:#04x} at {error.start}; "
            "percent-encode other characters.",
            status=400,
        ) from None


def require_content_type(request: Request) -> None:
    # Most requests say no length (a GET) or a type: neither is parsed then.
    if request.environ.get("CONTENT_LENGTH", "") in ("", "0") or request.environ.get("CONTENT_TYPE"):
        return
    if request.content_length:
        raise BerthError("content-type header required when content-length > 0", status=400)
