"""Errors raised by the domain and the store.

Each carries the HTTP status and the Placement error code it maps to, so that the API layer can render
it without a lookup table that could drift from the place the error is raised.  The ``code`` values are
Placement's (``placement.*``) because clients and its test suites match on them.
"""

from __future__ import annotations

from berth.domain import error_codes


class BerthError(Exception):
    status = 400
    code = error_codes.UNDEFINED
    # Finer than ``code``, for the metrics only (``error_codes.REASON_*``); never in the answer.
    reason: str | None = None

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        reason: str | None = None,
    ):
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        if reason is not None:
            self.reason = reason
        if status is not None:
            self.status = status
        self.headers = headers or {}


class BadRequest(BerthError):
    status = 400


class NotFound(BerthError):
    status = 404


class Conflict(BerthError):
    status = 409


class ConcurrentUpdate(Conflict):
    code = error_codes.CONCURRENT_UPDATE


class InventoryInUse(Conflict):
    code = error_codes.INVENTORY_IN_USE


class DuplicateName(Conflict):
    code = error_codes.DUPLICATE_NAME


class Unavailable(BerthError):
    """The database stayed busy or unreachable through every retry."""

    status = 503


class OutcomeUnknown(BerthError):
    """The connection was lost while a write was committed, and the database stayed unreachable for
    as long as finding out whether the write took effect may take."""

    status = 500


class Forbidden(BerthError):
    status = 403
