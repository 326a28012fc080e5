"""Traits a provider has."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

from sqlalchemy import Connection

from berth.domain.errors import ConcurrentUpdate
from berth.store.placement import names
from berth.store.placement.providers import GENERATION_CHANGED, bump_generation_by_uuid, require_provider
from berth.store.rawsql import db_time, execute, execute_many, fetch, values_rows
from berth.store.util import utcnow

_NAMES = """
SELECT t.name FROM traits t JOIN resource_provider_traits rpt ON rpt.trait_id = t.id
WHERE rpt.resource_provider_id = ?"""
_IDS = "SELECT trait_id FROM resource_provider_traits WHERE resource_provider_id = ?"
_DELETE = "DELETE FROM resource_provider_traits WHERE resource_provider_id = ? AND trait_id IN {ids}"
_INSERT = """
INSERT INTO resource_provider_traits (resource_provider_id, trait_id, created_at, updated_at)
VALUES (?, ?, ?, ?)"""


def provider_traits(conn: Connection, provider_id: int) -> list[str]:
    # Sorted here, not by the database, whose collation may not be bytewise: a PUT answers with the
    # same order without reading the traits back.
    return sorted(name for (name,) in fetch(conn, _NAMES, (provider_id,)))


def set_provider_traits(conn: Connection, provider_id: int, trait_ids: Mapping[str, int]) -> None:
    current = {trait_id for (trait_id,) in fetch(conn, _IDS, (provider_id,))}
    wanted = set(trait_ids.values())
    if current - wanted:
        execute(conn, _DELETE, (provider_id,), ids=sorted(current - wanted))
    now = db_time(conn, utcnow())
    execute_many(conn, _INSERT, [(provider_id, t, now, now) for t in sorted(wanted - current)])


# PUT .../traits on PostgreSQL as one statement (no BEGIN and COMMIT: one round trip instead of five);
# both changes hang on the generation compare-and-swap.  The statement finds the traits by name itself,
# and changes nothing unless it found every one: a custom trait's id cannot be remembered between
# requests (another worker may delete and re-create it), and looking the names up first cost a round
# trip of its own.  The names come as a VALUES list, for the reason given at
# ``berth.store.placement.inventories._REPLACE_PG``.
_REPLACE_PG = """
WITH named (name) AS ({named_rows}),
wanted AS (SELECT t.id FROM traits t JOIN named n ON n.name = t.name),
target AS (SELECT generation FROM resource_providers WHERE uuid = ?),
bumped AS (
    UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ?
    WHERE uuid = ? AND generation = ? AND (SELECT count(*) FROM wanted) = ?
    RETURNING id
),
removed AS (
    DELETE FROM resource_provider_traits t USING bumped b
    WHERE t.resource_provider_id = b.id AND t.trait_id NOT IN (SELECT id FROM wanted)
),
added AS (
    INSERT INTO resource_provider_traits (resource_provider_id, trait_id, created_at, updated_at)
    SELECT b.id, wanted.id, ?, ? FROM bumped b, wanted
    ON CONFLICT DO NOTHING
)
SELECT (SELECT id FROM bumped), (SELECT generation FROM target), (SELECT count(*) FROM wanted)"""


@lru_cache(maxsize=64)
def _replace_pg(traits: int) -> str:
    return _REPLACE_PG.format(named_rows=values_rows("(?::text)", traits, "SELECT NULL::text WHERE false"))


def replace_provider_traits(conn: Connection, uuid: str, generation: int, trait_names: Iterable[str]) -> int:
    """PUT .../traits: the provider's traits become exactly ``trait_names``; the new generation.

    Refusals come in the reference's order: an unknown provider, a stale generation, then unknown
    traits.
    """
    if conn.dialect.name != "postgresql":
        provider, bumped = bump_generation_by_uuid(conn, uuid, generation)
        if not bumped:
            raise ConcurrentUpdate(GENERATION_CHANGED)
        set_provider_traits(conn, provider["id"], names.require_trait_ids(conn, trait_names))
        return generation + 1
    wanted = sorted(set(trait_names))
    now = db_time(conn, utcnow())
    bumped_id, found_generation, found_traits = fetch(
        conn, _replace_pg(len(wanted)), (*wanted, uuid, now, uuid, generation, len(wanted), now, now)
    )[0]
    if bumped_id is None:
        if found_generation is None:
            require_provider(conn, uuid)
        if found_generation == generation and found_traits < len(wanted):
            names.require_trait_ids(conn, wanted)
        # Otherwise the generation was stale, or moved after the statement's snapshot.
        raise ConcurrentUpdate(GENERATION_CHANGED)
    return generation + 1
