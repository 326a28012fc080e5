"""The order in which writers lock a provider's rows on PostgreSQL, so that no two of them deadlock.

Every write that changes what a provider has or holds locks the provider's inventory rows first, all
of them and by id, and its provider row after. A claim locks the rows it raises by id and then bumps
their providers (``berth.store.placement.taking``); a release that bumped its providers first and
freed their inventories after deadlocked with it, and so did an inventory writer: each deadlock
costs both transactions PostgreSQL's deadlock_timeout (a second) before one is retried. All of a
provider's rows, not only those of the classes written: two writers of one provider then meet on its
first row, before either holds a provider row the other needs.

SQLite has one writer at a time: nothing to order there.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from sqlalchemy.engine import Connection

from berth.store.rawsql import execute, fetch

_LOCK_INVENTORIES_OF: Final = "SELECT id FROM inventories WHERE resource_provider_id IN {ids} ORDER BY id FOR UPDATE"
_PROVIDERS_OF_CONSUMERS: Final = "SELECT DISTINCT resource_provider_id FROM allocations WHERE consumer_id IN {ids}"


def lock_inventories_of(conn: Connection, provider_ids: Collection[int]) -> None:
    """Every inventory row of these providers locked, by id (PostgreSQL)."""
    if provider_ids and conn.dialect.name == "postgresql":
        execute(conn, _LOCK_INVENTORIES_OF, ids=sorted(provider_ids))


def lock_inventories_of_consumers(conn: Connection, consumers: Collection[str], also: Collection[int] = ()) -> None:
    """The inventory rows of every provider the consumers hold allocations on, and of ``also`` (what
    the write takes), locked by id before a write that frees anything (PostgreSQL). Consumers that
    hold nothing make the write a claim alone, whose statement locks what it takes in this order
    itself: nothing is locked for it here."""
    if conn.dialect.name != "postgresql" or not consumers:
        return
    held = {row[0] for row in fetch(conn, _PROVIDERS_OF_CONSUMERS, ids=sorted(consumers))}
    if held:
        lock_inventories_of(conn, held | set(also))
