"""How the claimers judge each answer: its outcome column, and whether an error body is Placement's."""

from __future__ import annotations

from typing import Any, Protocol


class Answer(Protocol):
    status_code: int

    @property
    def headers(self) -> Any: ...

    def json(self) -> Any: ...


def outcome_column(status: int) -> str:
    """The table's column of an answer's status."""
    if 200 <= status < 300:
        return "2xx"
    if status in (409, 503):
        return str(status)
    return "other"


def error_body_problem(response: Answer) -> str | None:
    """None when an error response carries Placement's JSON error body, else what is wrong."""
    try:
        body = response.json()
    except ValueError:
        return f"not JSON (content-type {response.headers.get('content-type')!r})"
    errors = body.get("errors") if isinstance(body, dict) else None
    if not isinstance(errors, list) or not errors:
        return "no 'errors' list"
    for error in errors:
        if not isinstance(error, dict) or not {"status", "title", "detail"} <= set(error):
            return "an error lacks status/title/detail"
        if error["status"] != response.status_code:
            return f"error status {error['status']!r} differs from HTTP {response.status_code}"
    return None


def status_problem(status: int, faulty: bool) -> str | None:
    """What is wrong with an answer's status, if anything (besides its body)."""
    if status >= 500 and status != 503:
        return f"HTTP {status}"
    if 400 <= status < 500 and status != 409:
        # e.g. a 404 deleting a consumer that the log says holds allocations
        return f"unexpected HTTP {status}"
    if status == 503 and not faulty:
        return "HTTP 503 without a fault"
    return None
