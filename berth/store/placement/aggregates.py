"""Aggregates a provider belongs to."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.domain.errors import ConcurrentUpdate
from berth.store.placement.providers import GENERATION_CHANGED, bump_generation, require_provider, revise
from berth.store.rawsql import db_time, execute, execute_many, fetch, values_rows
from berth.store.schema import placement_aggregates as aggs
from berth.store.schema import resource_provider_aggregates as rpa
from berth.store.util import utcnow


def provider_aggregates(conn: Connection, provider_id: int) -> list[str]:
    # In the order the aggregates were first seen, so a PUT's answer lists them as they were sent.
    return list(
        conn.execute(
            sa.select(aggs.c.uuid)
            .join(rpa, rpa.c.aggregate_id == aggs.c.id)
            .where(rpa.c.resource_provider_id == provider_id)
            .order_by(aggs.c.id)
        ).scalars()
    )


_CREATE = (
    "INSERT INTO placement_aggregates (uuid, created_at, updated_at) VALUES (?, ?, ?) ON CONFLICT (uuid) DO NOTHING"
)
_IDS = "SELECT uuid, id FROM placement_aggregates WHERE uuid IN {ids}"
_UNLINK_ALL = "DELETE FROM resource_provider_aggregates WHERE resource_provider_id = ?"
_UNLINK_OTHERS = _UNLINK_ALL + " AND NOT (aggregate_id IN {ids})"
_LINK = (
    "INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id, created_at, updated_at) "
    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


def aggregate_ids(conn: Connection, uuids: Iterable[str]) -> dict[str, int]:
    """Ids of the aggregates with these uuids; those no provider was ever put in are absent."""
    wanted = sorted(uuids)
    return {uuid: agg_id for uuid, agg_id in fetch(conn, _IDS, ids=wanted)} if wanted else {}


def set_provider_aggregates(conn: Connection, provider_id: int, uuids: Iterable[str]) -> None:
    """Link the provider to exactly these aggregates, creating those seen for the first time.  Step
    by step, for SQLite, where the writer holds the database lock throughout."""
    distinct = list(dict.fromkeys(uuids))
    now = db_time(conn, utcnow())
    execute_many(conn, _CREATE, [(uuid, now, now) for uuid in distinct])
    ids = [agg_id for _, agg_id in fetch(conn, _IDS, ids=distinct)] if distinct else []
    if ids:
        execute(conn, _UNLINK_OTHERS, (provider_id,), ids=ids)
    else:
        execute(conn, _UNLINK_ALL, (provider_id,))
    execute_many(conn, _LINK, [(provider_id, agg_id, now, now) for agg_id in ids])


# PUT .../aggregates on PostgreSQL as one statement (no BEGIN and COMMIT: one round trip instead of
# seven).  An aggregate seen for the first time is created; ``DO UPDATE`` (a no-op) rather than ``DO
# NOTHING`` so that the id of one a concurrent writer created after this statement's snapshot is
# returned as well.  ``{target}`` is the compare-and-swap of the generation (1.19 on), or before that
# just the provider, whose generation aggregates then leave alone.
_REPLACE_PG = """
WITH wanted (uuid) AS ({wanted_rows}),
found AS (SELECT id, generation FROM resource_providers WHERE uuid = ?),
target AS ({target}),
ids AS (
    INSERT INTO placement_aggregates (uuid, created_at, updated_at)
    SELECT wanted.uuid, ?, ? FROM wanted WHERE EXISTS (SELECT 1 FROM target)
    ON CONFLICT (uuid) DO UPDATE SET uuid = EXCLUDED.uuid
    RETURNING id
),
removed AS (
    DELETE FROM resource_provider_aggregates r USING target t
    WHERE r.resource_provider_id = t.id AND r.aggregate_id NOT IN (SELECT id FROM ids)
),
added AS (
    INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id, created_at, updated_at)
    SELECT t.id, ids.id, ?, ? FROM target t, ids
    ON CONFLICT DO NOTHING
)
SELECT (SELECT id FROM target), (SELECT generation FROM found)"""
_BUMP_TARGET = (
    "UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ? "
    "WHERE uuid = ? AND generation = ? RETURNING id"
)
# Before 1.19 the generation stays, but the revision moves on all the same.
_PLAIN_TARGET = "UPDATE resource_providers SET revision = revision + 1 WHERE id = (SELECT id FROM found) RETURNING id"


@lru_cache(maxsize=64)
def _replace_pg(aggregates: int, bump: bool) -> str:
    return _REPLACE_PG.format(
        wanted_rows=values_rows("(?)", aggregates, "SELECT NULL::varchar WHERE false"),
        target=_BUMP_TARGET if bump else _PLAIN_TARGET,
    )


def replace_provider_aggregates(
    conn: Connection, uuid: str, uuids: Sequence[str], expected_generation: int | None
) -> int:
    """PUT .../aggregates: the provider's aggregates become exactly ``uuids``; its generation after.

    With ``expected_generation`` (1.19 on) the generation is compared and moved on, else it is
    left alone, as in the reference.
    """
    bump = expected_generation is not None
    if conn.dialect.name != "postgresql":
        provider = require_provider(conn, uuid)
        generation: int = provider["generation"]
        if bump:
            if expected_generation != generation:
                raise ConcurrentUpdate(GENERATION_CHANGED)
            generation = bump_generation(conn, provider, conflict_detail=GENERATION_CHANGED)
        else:
            revise(conn, [provider["id"]])
        set_provider_aggregates(conn, provider["id"], uuids)
        return generation
    wanted = list(dict.fromkeys(uuids))
    now = db_time(conn, utcnow())
    target_params = (now, uuid, expected_generation) if bump else ()
    target_id: int | None
    found_generation: int | None
    target_id, found_generation = fetch(
        conn, _replace_pg(len(wanted), bump), (*wanted, uuid, *target_params, now, now, now, now)
    )[0]
    if found_generation is None:
        require_provider(conn, uuid)
    if target_id is None or found_generation is None:
        raise ConcurrentUpdate(GENERATION_CHANGED)
    return found_generation + 1 if bump else found_generation
