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


# The words for a flag in a query, as Nova reads ``all_tenants`` (oslo's ``bool_from_string``).
_TRUE_WORDS: Final = frozenset({"1", "t", "true", "on", "y", "yes"})
_FALSE_WORDS: Final = frozenset({"0", "f", "false", "off", "n", "no"})


def asks_every_project(args: Mapping[str, str]) -> bool:
    """Whether a list asks for every project's items: ``all_projects``, or Nova's ``all_tenants``.
    As Nova reads it, the parameter with no value asks for them, and a value that is no flag is a
    400 (not taken for false: the caller would see one project's items as if they were all)."""
    name = "all_projects" if "all_projects" in args else "all_tenants"
    text = args.get(name)
    if text is None:
        return False
    word = text.strip().lower()
    if word in _TRUE_WORDS or not word:
        return True
    if word in _FALSE_WORDS:
        return False
    raise BadRequest(
        f"Invalid {name} {text!r}: a flag is expected (1, true, yes, on; 0, false, no, off).", code=QUERY_INVALID
    )


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
