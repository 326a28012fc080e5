"""Traits a provider has."""
from __future__ import annotations

from berth.store.rawsql import db_time, execute, execute_many, fetch
from berth.store.util import utcnow

_NAMES = """
SELECT t.name FROM traits t JOIN resource_provider_traits rpt ON rpt.trait_id = t.id
WHERE rpt.resource_provider_id = ?"""
_IDS = "SELECT trait_id FROM resource_provider_traits WHERE resource_provider_id = ?"
_DELETE = "DELETE FROM resource_provider_traits WHERE resource_provider_id = ? AND trait_id IN {ids}"
_INSERT = """
INSERT INTO resource_provider_traits (resource_provider_id, trait_id, created_at, updated_at)
VALUES (?, ?, ?, ?)"""


def provider_traits(conn, provider_id) -> list[str]:
    # Sorted here, not by the database, whose collation may not be bytewise: a PUT answers with the
    # same order without reading the traits back.
    return sorted(name for (name,) in fetch(conn, _NAMES, (provider_id,)))


def set_provider_traits(conn, provider_id, trait_ids: dict[str, int]) -> None:
    current = {trait_id for (trait_id,) in fetch(conn, _IDS, (provider_id,))}
    wanted = set(trait_ids.values())
    if current - wanted:
        execute(conn, _DELETE, (provider_id,), ids=sorted(current - wanted))
    now = db_time(conn, utcnow())
    execute_many(conn, _INSERT, [(provider_id, t, now, now) for t in sorted(wanted - current)])
