"""The priority a pick gives its consumer, kept with the consumer (``consumer_priorities``).

A consumer without a row has ``DEFAULT_PRIORITY``, so a pick of that priority writes nothing and
costs what it did before priorities existed. The row goes with the consumer: every path that
deletes the consumer's row (``DELETE /allocations/{c}``, an empty PUT or POST, a reshape emptying
it, a lease running out, a preemption) deletes it in the same transaction
(``berth.store.placement.allocations``).
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import Connection

from berth.store.rawsql import db_time, execute, fetch_value
from berth.store.util import utcnow

DEFAULT_PRIORITY: Final = 0
MIN_PRIORITY: Final = -1000
MAX_PRIORITY: Final = 1000

_SET = """
INSERT INTO consumer_priorities (consumer_uuid, priority, created_at) VALUES (?, ?, ?)
ON CONFLICT (consumer_uuid) DO UPDATE SET priority = excluded.priority, created_at = excluded.created_at"""
_OF = "SELECT priority FROM consumer_priorities WHERE consumer_uuid = ?"


def set_priority(conn: Connection, consumer_uuid: str, priority: int) -> None:
    """Keep the consumer's priority (none kept for the default)."""
    if priority == DEFAULT_PRIORITY:
        # A pick's consumer is new, and a deleted consumer's row went with it: nothing to replace.
        return
    execute(conn, _SET, (consumer_uuid, priority, db_time(conn, utcnow())))


def priority_of(conn: Connection, consumer_uuid: str) -> int:
    found = fetch_value(conn, _OF, (consumer_uuid,))
    return DEFAULT_PRIORITY if found is None else int(found)
