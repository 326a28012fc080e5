"""Lists a page at a time, as Nova pages its lists: ``limit`` (at most ``MAX_LIMIT``, which is also
the page given when none is asked for) and ``marker`` (the id of the last item of the page before),
and a ``<collection>_links`` entry ``next`` whenever a page came back full."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlencode

from werkzeug import Request

from berth.conductor.errors import MARKER_NOT_FOUND, QUERY_INVALID
from berth.domain.errors import BadRequest

# The most items one page holds (Nova's ``max_limit`` default).
MAX_LIMIT: Final = 1000


def page_limit(args: Mapping[str, str]) -> int:
    """The page's size: ``limit`` if given (0, as in Nova, means the largest page), at most
    ``MAX_LIMIT``; a 400 saying what is wrong with any other value."""
    text = args.get("limit")
    if text is None:
        return MAX_LIMIT
    try:
        limit = int(text)
    except ValueError:
        limit = -1
    if limit < 0:
        raise BadRequest(f"limit must be an integer of 0 or more, not {text!r}.", code=QUERY_INVALID)
    return min(limit, MAX_LIMIT) or MAX_LIMIT


def marker_not_found(marker: str) -> BadRequest:
    return BadRequest(f"marker [{marker}] not found", code=MARKER_NOT_FOUND)


def links(request: Request, collection: str, items: Sequence[Mapping[str, Any]], limit: int) -> dict[str, Any]:
    """``{<collection>_links: [next]}`` when the page is full, naming its last item as the next
    page's marker and keeping the request's other parameters; else nothing."""
    if not items or len(items) < limit:
        return {}
    query = [(k, v) for k, v in request.args.items(multi=True) if k not in ("limit", "marker")]
    query += [("limit", str(limit)), ("marker", str(items[-1]["id"]))]
    href = f"{request.base_url}?{urlencode(query)}"
    return {f"{collection}_links": [{"rel": "next", "href": href}]}
