"""Taking capacity for a write's new allocations, and inserting their rows.

Each (provider, class) a write names must have an inventory; each allocation must meet its unit
constraints; the sum the write adds must fit the inventory's room, unless it is no more than what
the same write freed there (its consumers' allocations replaced: ``freed``), which leaves the
inventory no worse than before, as Placement allows on an inventory over its capacity (one shrunk
under its allocations, whose servers must still be moved away). ``take_and_insert`` checks all
three, raises every inventory's ``used``, bumps the generation of each provider written to and
inserts the rows, or refuses the whole write (409, for the first condition that fails in the order
they are checked one by one: inventories and units by allocation, then room by inventory id).

On PostgreSQL all of it is one statement (``_CLAIM_PG``): it locks the inventory rows in id order
(so that concurrent writers queue instead of deadlocking), raises those whose units and room allow,
and inserts the rows only when every one was raised; what it returns names the refusal when one is
due. With a statement for each step a pick's claim made three round trips more. On SQLite, whose
writers the write lock serialises, the rows are read and checked first, then raised, then inserted;
a PostgreSQL write too large for one statement goes the same way, its rows locked by the read.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from math import gcd
from typing import Any, Final

import os_resource_classes
import sqlalchemy as sa
from sqlalchemy import Connection

from berth.domain import error_codes
from berth.domain.capacity import fits_units, room_sql, units_of_all_sql
from berth.domain.errors import ConcurrentUpdate, Conflict
from berth.store.rawsql import execute, fetch, insert_rows

# What a write takes in all, by (provider id, class id).
Wanted = dict[tuple[int, int], int]


AllocationRow = tuple[int, str, int, int, object, object]
# id, provider id, class id, min_unit, max_unit, step_size
InventoryRow = tuple[Any, ...]


@dataclass
class Targets:
    """The providers and resource classes a write names, by uuid and name, with their row ids."""

    provider_ids: dict[str, int]
    class_ids: dict[str, int]

    def no_inventory(self, provider_ids: Iterable[int], rc_ids: Iterable[int]) -> Conflict:
        """No inventory of the classes ``rc_ids`` on the providers ``provider_ids``, all named."""
        rc_names = ", ".join(self._class_name(rc_id) for rc_id in rc_ids)
        provider_uuids = ", ".join(self._provider_uuid(provider_id) for provider_id in provider_ids)
        return Conflict(
            f"Unable to allocate inventory: Inventory for '{rc_names}' on resource provider '{provider_uuids}' "
            "invalid.",
            reason=error_codes.REASON_NO_INVENTORY,
        )

    def in_placements_order(self, rc_ids: Iterable[int]) -> list[int]:
        """``rc_ids`` (in the order the write names them) in the order Placement names them: it joins
        a Python set of its own ids of the classes, and the same set built in the same order iterates
        the same way. A standard class's id there is its place in os-resource-classes' list; a custom
        class's is from 10000 on, for which 10000 past Berth's own id stands in."""
        by_placement_id = {
            _STANDARD_PLACES.get(self._class_name(rc_id), _FIRST_CUSTOM_ID + rc_id): rc_id for rc_id in rc_ids
        }
        return [by_placement_id[placement_id] for placement_id in set(by_placement_id)]

    def breaks_unit_constraints(self, key: tuple[int, int]) -> Conflict:
        rc_name, provider_uuid = self._names(key)
        return Conflict(
            f"Unable to allocate inventory: Unable to create allocation for '{rc_name}' on resource "
            f"provider '{provider_uuid}'. The requested amount would violate inventory constraints.",
            reason=error_codes.REASON_UNIT_CONSTRAINTS,
        )

    def no_room(self, key: tuple[int, int]) -> Conflict:
        rc_name, provider_uuid = self._names(key)
        return Conflict(
            f"Unable to allocate inventory: Unable to create allocation for '{rc_name}' on "
            f"resource provider '{provider_uuid}'. The requested amount would exceed the capacity.",
            reason=error_codes.REASON_CAPACITY_EXCEEDED,
        )

    def _names(self, key: tuple[int, int]) -> tuple[str, str]:
        provider_id, rc_id = key
        return self._class_name(rc_id), self._provider_uuid(provider_id)

    def _class_name(self, rc_id: int) -> str:
        return next(name for name, id_ in self.class_ids.items() if id_ == rc_id)

    def _provider_uuid(self, provider_id: int) -> str:
        return next(uuid for uuid, id_ in self.provider_ids.items() if id_ == provider_id)


_STANDARD_PLACES: Final = {name: place for place, name in enumerate(os_resource_classes.STANDARDS)}
_FIRST_CUSTOM_ID: Final = 10000


_INVENTORIES_OF = """
SELECT id, resource_provider_id, resource_class_id, min_unit, max_unit, step_size
FROM inventories WHERE resource_provider_id IN {ids} ORDER BY id"""
# One provider's (a claim on one host, the common case): PostgreSQL plans a statement over a list
# parameter again on every run (its plan for any list looks dearer than the one for the list at hand,
# about 0.05 ms each time), and keeps one plan for this one.
_INVENTORIES_OF_ONE = """
SELECT id, resource_provider_id, resource_class_id, min_unit, max_unit, step_size
FROM inventories WHERE resource_provider_id = ? ORDER BY id"""
# Each amount comes with its allowance: what the write freed from that inventory (``take_and_insert``).
_TAKE = f"""
UPDATE inventories SET used = used + ?
WHERE id = ? AND ({room_sql("inventories", "?")} OR ? <= ?)"""
# PostgreSQL, a write too large for _CLAIM_PG: the inventory rows are first locked in id order (by the
# SELECT above, FOR UPDATE), then raised by one statement, which bumps the providers' generations too.
_TAKE_ALL_PG = f"""
WITH wanted (id, amount, allowance) AS (VALUES {{values}}),
taken AS (
    UPDATE inventories SET used = inventories.used + wanted.amount
    FROM wanted
    WHERE inventories.id = wanted.id
      AND ({room_sql("inventories", "wanted.amount")} OR wanted.amount <= wanted.allowance)
    RETURNING inventories.id, inventories.resource_provider_id
),
touched AS (
    UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ?
    WHERE id IN (SELECT resource_provider_id FROM taken)
)
SELECT id FROM taken"""
# SQLite's (3.35 on): VALUES names its columns column1, column2, column3 (the allowance); the
# capacity condition the guard.
_TAKE_ALL_SQLITE = f"""
UPDATE inventories SET used = inventories.used + wanted.column2
FROM (VALUES {{values}}) AS wanted
WHERE inventories.id = wanted.column1
  AND ({room_sql("inventories", "wanted.column2")} OR wanted.column2 <= wanted.column3)
RETURNING inventories.id"""
# Rows per statement: two parameters each, far below PostgreSQL's limit of 65,535 per statement
# even for the largest POST /allocations.
_TAKE_CHUNK = 5000
_INSERT = "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at)"
_INSERTED_ROW = "(?, ?, ?, ?, ?, ?)"
# Allocation writes take no provider generation from the client (the reference ignores one), so the
# bump only tells other writers of the provider that something changed.
_TOUCH_PROVIDER = (
    "UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ? WHERE id = ?"
)
TOUCH_PROVIDERS = (
    "UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ? "
    "WHERE id IN {ids}"
)

# PostgreSQL: every step in one statement. ``wanted``: the sum each (provider, class) takes, and the
# lowest, highest and greatest common divisor of its allocations' amounts, which meet the unit
# constraints exactly when each amount does. The rows are locked in id order first; the UPDATE then
# checks units and room on their newest versions. The allocations go in only when every inventory
# was raised; the locked rows come back with whether each was, from which a refusal is told.
_CLAIM_PG = f"""
WITH {{new_consumer}}wanted (provider_id, class_id, amount, lowest, highest, divisor, allowance) AS (VALUES {{wanted}}),
locked AS MATERIALIZED (
    SELECT i.id, i.resource_provider_id, i.resource_class_id, i.min_unit, i.max_unit, i.step_size
    FROM inventories i JOIN wanted w ON i.resource_provider_id = w.provider_id AND i.resource_class_id = w.class_id
    ORDER BY i.id
    FOR UPDATE OF i
),
taken AS (
    UPDATE inventories SET used = inventories.used + w.amount
    FROM locked l JOIN wanted w ON w.provider_id = l.resource_provider_id AND w.class_id = l.resource_class_id
    WHERE inventories.id = l.id
      AND {units_of_all_sql("inventories", "w.lowest", "w.highest", "w.divisor")}
      AND ({room_sql("inventories", "w.amount")} OR w.amount <= w.allowance)
    RETURNING inventories.id, inventories.resource_provider_id
),
touched AS (
    UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ?
    WHERE id IN (SELECT resource_provider_id FROM taken)
),
placed AS (
    INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at)
    SELECT a.provider_id, a.consumer_id, a.class_id, a.amount, ?, ?
    FROM (VALUES {{rows}}) AS a (provider_id, consumer_id, class_id, amount)
    WHERE (SELECT COUNT(*) FROM taken) = ?{{consumer_written}}
)
SELECT l.id, l.resource_provider_id, l.resource_class_id, l.min_unit, l.max_unit, l.step_size,
       t.id IS NOT NULL{{consumer_columns}}
FROM locked l LEFT JOIN taken t ON t.id = l.id"""
# A single new consumer (a pick's) may be written by the same statement, its owners' ids looked up
# in it (``NewConsumer``); its allocations then go in only with its row. Unless the writer counts the
# consumer's quota usage itself (``berth.store.quotas.own_count``, which tells the triggers to pass
# it by), the row goes in only when its project is neither counted nor limited: the counters'
# triggers would otherwise count the allocations twice, once for the consumer's row (which finds
# them written) and once for their own insert. A project that is not counted cannot become so, nor
# gain a limit, while the statement's transaction lasts (``berth.store.quotas.usage.start_counting``
# waits for every writer of consumers), so a consumer written this way has no quota to check.
_NEW_CONSUMER_PG = """owner AS (
    SELECT p.id AS project_pk, u.id AS user_pk, ct.id AS type_pk,
           EXISTS (SELECT 1 FROM quota_counted_projects q WHERE q.project_pk = p.id)
           OR EXISTS (SELECT 1 FROM quota_limits l WHERE l.project_id = p.external_id) AS counted
    FROM projects p JOIN users u ON u.external_id = ? LEFT JOIN consumer_types ct ON ct.name = ?
    WHERE p.external_id = ? AND (ct.id IS NOT NULL OR ?)
),
consumer AS (
    INSERT INTO consumers (uuid, project_id, user_id, generation, consumer_type_id, created_at, updated_at)
    SELECT ?, project_pk, user_pk, 1, type_pk, ?, ? FROM owner WHERE ? OR NOT counted
    RETURNING uuid
),
"""
_CONSUMER_WRITTEN = " AND EXISTS (SELECT 1 FROM consumer)"
_CONSUMER_COLUMNS = ", (SELECT COUNT(*) FROM consumer), (SELECT COUNT(*) FROM owner)"
_WANTED_ROW = "(?::integer, ?::integer, ?::bigint, ?::bigint, ?::bigint, ?::bigint, ?::bigint)"
_CLAIMED_ROW = "(?::integer, ?::varchar, ?::integer, ?::bigint)"
# Allocation rows in one statement at most: four parameters each (and six for each provider and
# class), well within PostgreSQL's 65,535 a statement. A larger write (a POST /allocations of
# thousands of consumers) locks, raises and inserts in statements of their own.
_MOST_ROWS_IN_ONE: Final = 8000


@dataclass(frozen=True)
class NewConsumer:
    """A new consumer for ``take_and_insert`` to write with its allocations (PostgreSQL), and whether
    its writer counts its quota usage itself (``counted_by_writer``)."""

    uuid: str
    project_id: str
    user_id: str
    consumer_type: str | None
    counted_by_writer: bool


class ConsumerNotWritten(Exception):
    """A ``NewConsumer`` whose row was not written: a project, user or consumer type it names does not
    exist yet, or (``counted``) its project is counted (or has limits) and its writer does not count
    it. The inventories were raised: the write must be rolled back, and the consumer written the
    usual way."""

    def __init__(self, counted: bool):
        super().__init__("counted project" if counted else "owners to create")
        self.counted = counted


def take_and_insert(
    conn: Connection,
    wanted: Wanted,
    rows: list[AllocationRow],
    targets: Targets,
    now: object,
    new_consumer: NewConsumer | None = None,
    freed: Wanted | None = None,
) -> None:
    """Take what ``wanted`` sums up of ``rows`` from the inventories, bump the providers' generations
    and insert ``rows``; or refuse the whole write (409), which its caller then rolls back.
    ``new_consumer`` (PostgreSQL only): the consumer of every row, written by the same statement, or
    ``ConsumerNotWritten`` raised. ``freed``: what the same write took off each inventory before (its
    consumers' allocations it replaces): as much may be taken again whatever the room."""
    allowance = freed or {}
    if conn.dialect.name == "postgresql" and len(rows) <= _MOST_ROWS_IN_ONE:
        _take_and_insert_pg(conn, wanted, rows, targets, now, new_consumer, allowance)
        return
    assert new_consumer is None, "a new consumer goes with its allocations only on PostgreSQL"
    inventory_rows = _lock_inventories(conn, wanted)
    _check_unit_constraints(conn, rows, inventory_rows, targets)
    _take_capacity(conn, wanted, inventory_rows, targets, now, allowance)
    insert_rows(conn, _INSERT, _INSERTED_ROW, rows)


def _take_and_insert_pg(
    conn: Connection,
    wanted: Wanted,
    rows: list[AllocationRow],
    targets: Targets,
    now: object,
    new_consumer: NewConsumer | None,
    allowance: Wanted,
) -> None:
    amounts: defaultdict[tuple[int, int], list[int]] = defaultdict(list)
    for provider_id, _consumer, rc_id, amount, _created, _updated in rows:
        amounts[(provider_id, rc_id)].append(amount)
    keys = sorted(wanted)
    with_consumer = new_consumer is not None
    sql = (
        _CLAIM_PG.replace("{new_consumer}", _NEW_CONSUMER_PG if with_consumer else "")
        .replace("{wanted}", ", ".join([_WANTED_ROW] * len(keys)))
        .replace("{rows}", ", ".join([_CLAIMED_ROW] * len(rows)))
        .replace("{consumer_written}", _CONSUMER_WRITTEN if with_consumer else "")
        .replace("{consumer_columns}", _CONSUMER_COLUMNS if with_consumer else "")
    )
    params: list[Any] = []
    if new_consumer is not None:
        params += [new_consumer.user_id, new_consumer.consumer_type, new_consumer.project_id]
        params += [new_consumer.consumer_type is None, new_consumer.uuid, now, now, new_consumer.counted_by_writer]
    for key in keys:
        each = amounts[key]
        params += [*key, wanted[key], min(each), max(each), gcd(*each), allowance.get(key, 0)]
    params += [now, now, now]  # the providers', then the rows' created_at and updated_at
    for provider_id, consumer_uuid, rc_id, amount, _created, _updated in rows:
        params += [provider_id, consumer_uuid, rc_id, amount]
    params.append(len(keys))
    try:
        locked = fetch(conn, sql, params)
    except sa.exc.IntegrityError:
        if new_consumer is None:
            raise
        raise ConcurrentUpdate(
            "consumer generation conflict - another request created this consumer meanwhile"
        ) from None
    taken = {row[0] for row in locked if row[6]}
    if len(taken) == len(keys):
        if new_consumer is not None and not locked[0][7]:
            raise ConsumerNotWritten(counted=bool(locked[0][8]))
        return
    # Refused: the first condition that fails, as the checks one by one would find it.
    inventory_rows = {(row[1], row[2]): tuple(row[:6]) for row in locked}
    _check_unit_constraints(conn, rows, inventory_rows, targets)
    for key in sorted(keys, key=lambda key: inventory_rows[key][0]):
        if inventory_rows[key][0] not in taken:
            raise targets.no_room(key)
    raise AssertionError("a refused write names no inventory it could not raise")


def _lock_inventories(conn: Connection, wanted: dict[tuple[int, int], int]) -> dict[tuple[int, int], InventoryRow]:
    """The inventory rows of the providers written to, by (provider, class); locked on PostgreSQL, in id order."""
    lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
    provider_ids = sorted({provider_id for provider_id, _ in wanted})
    if len(provider_ids) == 1:
        rows = fetch(conn, _INVENTORIES_OF_ONE + lock, (provider_ids[0],))
    else:
        rows = fetch(conn, _INVENTORIES_OF + lock, ids=provider_ids)
    return {(row[1], row[2]): row for row in rows}


def _check_unit_constraints(
    conn: Connection,
    rows_to_insert: list[AllocationRow],
    inventory_rows: dict[tuple[int, int], InventoryRow],
    targets: Targets,
) -> None:
    """Each provider written to holds an inventory of some class the write names, each allocation
    needs an inventory of its class and meets its unit constraints (409 otherwise). The first is
    Placement's first check, whose refusal names every such provider and every class of the write."""
    classes = dict.fromkeys(rc_id for _provider, _consumer, rc_id, *_ in rows_to_insert)
    holding = {provider_id for provider_id, rc_id in inventory_rows if rc_id in classes}
    unsure = sorted({provider_id for provider_id, *_ in rows_to_insert} - holding)
    if unsure:
        # ``inventory_rows`` may hold only the (provider, class) pairs the write names (PostgreSQL's
        # refused claim): a provider may hold a class the write names for another provider.
        held = fetch(conn, _INVENTORIES_OF, ids=unsure)
        holding |= {provider_id for _id, provider_id, rc_id, *_ in held if rc_id in classes}
        empty = [
            provider_id for provider_id in dict.fromkeys(row[0] for row in rows_to_insert) if provider_id not in holding
        ]
        if empty:
            raise targets.no_inventory(empty, targets.in_placements_order(classes))
    for provider_id, _consumer, rc_id, amount, _created, _updated in rows_to_insert:
        inventory = inventory_rows.get((provider_id, rc_id))
        if inventory is None:
            raise targets.no_inventory([provider_id], [rc_id])
        _id, _provider, _class, min_unit, max_unit, step_size = inventory
        if not fits_units(amount, min_unit, max_unit, step_size):
            raise targets.breaks_unit_constraints((provider_id, rc_id))


def _take_capacity(
    conn: Connection,
    wanted: dict[tuple[int, int], int],
    inventory_rows: dict[tuple[int, int], InventoryRow],
    targets: Targets,
    now: object,
    allowance: Wanted,
) -> None:
    """Raise each inventory's ``used`` while it stays within capacity (or by no more than its
    ``allowance``), or refuse the whole write (409)."""
    ordered = sorted(wanted, key=lambda key: inventory_rows[key][0])
    if conn.dialect.name == "postgresql":
        taken: set[int] = set()
        for start in range(0, len(ordered), _TAKE_CHUNK):
            chunk = ordered[start : start + _TAKE_CHUNK]
            sql = _TAKE_ALL_PG.replace("{values}", ", ".join(["(?::bigint, ?::bigint, ?::bigint)"] * len(chunk)))
            params = [value for key in chunk for value in (inventory_rows[key][0], wanted[key], allowance.get(key, 0))]
            taken.update(inventory_id for (inventory_id,) in fetch(conn, sql, [*params, now]))
        for key in ordered:
            if inventory_rows[key][0] not in taken:
                raise targets.no_room(key)
        return
    if len(ordered) > 1 and sqlite3.sqlite_version_info >= (3, 35):
        # One statement for the whole write (UPDATE ... FROM and RETURNING: SQLite 3.35 on), which
        # holds every other writer back while it runs.
        taken = set()
        for start in range(0, len(ordered), _TAKE_CHUNK):
            chunk = ordered[start : start + _TAKE_CHUNK]
            sql = _TAKE_ALL_SQLITE.replace("{values}", ", ".join(["(?, ?, ?)"] * len(chunk)))
            params = [value for key in chunk for value in (inventory_rows[key][0], wanted[key], allowance.get(key, 0))]
            taken.update(inventory_id for (inventory_id,) in fetch(conn, sql, params))
        for key in ordered:
            if inventory_rows[key][0] not in taken:
                raise targets.no_room(key)
        execute(conn, TOUCH_PROVIDERS, (now,), ids=sorted({provider_id for provider_id, _ in wanted}))
        return
    for key in ordered:
        amount = wanted[key]
        if execute(conn, _TAKE, (amount, inventory_rows[key][0], amount, amount, allowance.get(key, 0))) != 1:
            raise targets.no_room(key)
    for provider_id in sorted({provider_id for provider_id, _ in wanted}):
        execute(conn, _TOUCH_PROVIDER, (now, provider_id))
