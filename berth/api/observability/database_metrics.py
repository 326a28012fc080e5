"""The database's figures as metrics: transaction retries, and connections out of the pool."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from berth.api.observability.metrics import DB_POOL_CONNECTIONS_IN_USE, DB_TRANSACTION_RETRIES
from berth.store.database import Database


def _count_retry() -> None:
    DB_TRANSACTION_RETRIES.inc()


def _checked_out(*_: Any) -> None:
    DB_POOL_CONNECTIONS_IN_USE.inc()


def _checked_in(*_: Any) -> None:
    DB_POOL_CONNECTIONS_IN_USE.dec()


def observe_database(db: Database) -> None:
    """Count ``db``'s retries and follow its pool's checkouts (few: threads keep their connection)."""
    if _count_retry not in db.retry_listeners:
        db.retry_listeners.append(_count_retry)
    if not event.contains(db.engine, "checkout", _checked_out):
        event.listen(db.engine, "checkout", _checked_out)
        event.listen(db.engine, "checkin", _checked_in)
