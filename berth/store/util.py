"""Small helpers shared by the store modules."""

from __future__ import annotations

import datetime


def utcnow() -> datetime.datetime:
    # Stored naive in UTC: SQLite has no time zones, and one convention for both databases keeps
    # last-modified headers identical whichever database serves them.
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def latest(*moments: datetime.datetime | None) -> datetime.datetime | None:
    """The latest of these moments that are known."""
    present = [m for m in moments if m is not None]
    return max(present) if present else None
