"""Allocations: what consumers hold, written atomically across providers.

A write replaces every allocation of the named consumers in one transaction:

1. the consumers' generations are compared and swapped (row lock on each consumer);
2. their old allocations are removed and the inventories' ``used`` counters lowered;
3. each new allocation raises its inventory's ``used`` with a conditional UPDATE that only matches
   while the result stays within capacity.  On PostgreSQL the inventory rows are locked first
   (``SELECT ... FOR UPDATE`` in id order) and then raised together by one UPDATE, which re-checks
   the condition on the rows' newest versions, so two writers can never both take the last units;
   on SQLite writers are serialised by ``BEGIN IMMEDIATE`` and raise one row at a time;
4. the generation of every provider that receives allocations is bumped.

Rows are touched in a fixed order (consumers by uuid, inventories by id) so that concurrent writers
on PostgreSQL queue behind each other instead of deadlocking.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, RowMapping

from berth.domain import error_codes
from berth.domain.capacity import fits_units, room_sql
from berth.domain.errors import BadRequest, ConcurrentUpdate, Conflict
from berth.store.placement import consumers as consumer_store
from berth.store.placement import names
from berth.store.placement.providers import revise
from berth.store.rawsql import db_time, execute, fetch, insert_rows
from berth.store.schema import (
    allocations,
    resource_classes,
)
from berth.store.schema import (
    resource_providers as rp,
)
from berth.store.util import utcnow

UNSET = object()


@dataclass
class ConsumerAllocations:
    consumer_uuid: str
    # provider uuid -> resource class name -> amount
    allocations: dict[str, dict[str, int]]
    project_id: str | None = None
    user_id: str | None = None
    # The generation the client believes the consumer has: None for "new consumer", UNSET when the
    # microversion predates consumer generations and no check is made.
    consumer_generation: object = UNSET
    consumer_type: str | None = None


# Read for every GET /allocations/{consumer} and by every tracker's write of a consumer: built
# once, so that SQLAlchemy finds its compiled form by a key it keeps rather than building the
# statement and working out that key on each call.
_SHOWN_OF_CONSUMER: Final = (
    sa.select(
        rp.c.uuid.label("provider_uuid"),
        rp.c.generation.label("provider_generation"),
        resource_classes.c.name.label("resource_class"),
        allocations.c.used,
        allocations.c.created_at,
        allocations.c.updated_at,
    )
    .select_from(
        allocations.join(rp, rp.c.id == allocations.c.resource_provider_id).join(
            resource_classes, resource_classes.c.id == allocations.c.resource_class_id
        )
    )
    .where(allocations.c.consumer_id == sa.bindparam("consumer_uuid"))
    .order_by(rp.c.id, resource_classes.c.id)
)


def allocations_of_consumer(conn: Connection, consumer_uuid: str) -> Sequence[RowMapping]:
    return conn.execute(_SHOWN_OF_CONSUMER, {"consumer_uuid": consumer_uuid}).mappings().all()


def allocations_on_provider(conn: Connection, provider_id: int) -> Sequence[RowMapping]:
    return (
        conn.execute(
            sa.select(
                allocations.c.consumer_id,
                resource_classes.c.name.label("resource_class"),
                allocations.c.used,
                allocations.c.updated_at,
            )
            .join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id)
            .where(allocations.c.resource_provider_id == provider_id)
            .order_by(allocations.c.consumer_id, resource_classes.c.id)
        )
        .mappings()
        .all()
    )


def _check_consumer_generation(existing: Mapping[str, Any] | None, request: ConsumerAllocations) -> None:
    if request.consumer_generation is UNSET:
        return
    expected = request.consumer_generation
    if existing is None:
        if expected is not None:
            raise ConcurrentUpdate(f"consumer generation conflict - expected null but got {expected}")
    elif expected is None:
        raise ConcurrentUpdate(f"consumer generation conflict - expected {existing['generation']} but got null")
    elif expected != existing["generation"]:
        raise ConcurrentUpdate(f"consumer generation conflict - expected {existing['generation']} but got {expected}")


_OF_CONSUMER = "SELECT resource_provider_id, resource_class_id, used FROM allocations WHERE consumer_id = ?"
_DELETE_OF_CONSUMER = "DELETE FROM allocations WHERE consumer_id = ?"
_FREE = "UPDATE inventories SET used = used - ? WHERE resource_provider_id = ? AND resource_class_id = ?"
_PROVIDERS = "SELECT uuid, id FROM resource_providers WHERE uuid IN {ids}"
_INVENTORIES_OF = """
SELECT id, resource_provider_id, resource_class_id, min_unit, max_unit, step_size
FROM inventories WHERE resource_provider_id IN {ids} ORDER BY id"""
# One provider's (a claim on one host, the common case): PostgreSQL plans a statement over a list
# parameter again on every run (its plan for any list looks dearer than the one for the list at hand,
# about 0.05 ms each time), and keeps one plan for this one.
_INVENTORIES_OF_ONE = """
SELECT id, resource_provider_id, resource_class_id, min_unit, max_unit, step_size
FROM inventories WHERE resource_provider_id = ? ORDER BY id"""
_TAKE = f"""
UPDATE inventories SET used = used + ?
WHERE id = ? AND {room_sql("inventories", "?")}"""
# PostgreSQL: the inventory rows are first locked in id order (by the SELECT above, FOR UPDATE), so
# that concurrent writers queue instead of deadlocking, then all of them are raised by one statement:
# a round trip per resource class fewer.  The capacity condition stays the guard.
# The generations of the providers that received units are bumped by the same statement.
_TAKE_ALL_PG = f"""
WITH wanted (id, amount) AS (VALUES {{values}}),
taken AS (
    UPDATE inventories SET used = inventories.used + wanted.amount
    FROM wanted
    WHERE inventories.id = wanted.id
      AND {room_sql("inventories", "wanted.amount")}
    RETURNING inventories.id, inventories.resource_provider_id
),
touched AS (
    UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ?
    WHERE id IN (SELECT resource_provider_id FROM taken)
)
SELECT id FROM taken"""
# SQLite's (3.35 on): VALUES names its columns column1, column2; the capacity condition the guard.
_TAKE_ALL_SQLITE = f"""
UPDATE inventories SET used = inventories.used + wanted.column2
FROM (VALUES {{values}}) AS wanted
WHERE inventories.id = wanted.column1
  AND {room_sql("inventories", "wanted.column2")}
RETURNING inventories.id"""
# Rows per statement: two parameters each, far below PostgreSQL's limit of 65,535 per statement
# even for the largest POST /allocations.
_TAKE_CHUNK = 5000
_INSERT = "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used, created_at, updated_at)"
_INSERTED_ROW = "(?, ?, ?, ?, ?, ?)"
_INSERT_CONSUMERS = (
    "INSERT INTO consumers (uuid, project_id, user_id, generation, consumer_type_id, created_at, updated_at)"
)
_INSERTED_CONSUMER = "(?, ?, ?, 1, ?, ?, ?)"
_INSERT_CONSUMER = f"{_INSERT_CONSUMERS} VALUES {_INSERTED_CONSUMER}"
# The same for owners that exist already (the common case), their ids looked up in the statement
# itself: no row is inserted when the project, the user or a named consumer type is missing.
_INSERT_CONSUMER_OF_KNOWN_OWNERS = f"""
{_INSERT_CONSUMERS}
SELECT ?, p.id, u.id, 1, ct.id, ?, ?
FROM projects p JOIN users u ON u.external_id = ? LEFT JOIN consumer_types ct ON ct.name = ?
WHERE p.external_id = ? AND (ct.id IS NOT NULL OR ?)"""
_DELETE_CONSUMER = "DELETE FROM consumers WHERE id = ? AND generation = ?"
# A pick's priority (berth.store.pick.preemption) goes with the consumer's row: no path that deletes
# the consumer leaves it behind for a later consumer of the same uuid.
_FORGET_PRIORITY = "DELETE FROM consumer_priorities WHERE consumer_uuid = ?"
_UPDATE_CONSUMER = """
UPDATE consumers SET generation = generation + 1, updated_at = ?, project_id = COALESCE(?, project_id),
                     user_id = COALESCE(?, user_id), consumer_type_id = COALESCE(?, consumer_type_id)
WHERE id = ? AND generation = ?"""
# Allocation writes take no provider generation from the client (the reference ignores one), so the
# bump only tells other writers of the provider that something changed.
_TOUCH_PROVIDER = (
    "UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ? WHERE id = ?"
)
_TOUCH_PROVIDERS = (
    "UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ? "
    "WHERE id IN {ids}"
)


def _remove_allocations(conn: Connection, consumer_uuid: str) -> set[int]:
    """Take the consumer's allocations off the books; the providers they were on."""
    rows = fetch(conn, _OF_CONSUMER, (consumer_uuid,))
    if not rows:
        return set()
    execute(conn, _DELETE_OF_CONSUMER, (consumer_uuid,))
    # Freeing leaves generations alone, as in the reference, but changes what candidates see.  The
    # provider rows first, then their inventories: the order in which inventory writers lock them.
    freed_from = {provider_id for provider_id, _, _ in rows}
    revise(conn, freed_from)
    freed: dict[tuple[int, int], int] = defaultdict(int)
    for provider_id, rc_id, used in rows:
        freed[(provider_id, rc_id)] += used
    for (provider_id, rc_id), amount in sorted(freed.items()):
        execute(conn, _FREE, (amount, provider_id, rc_id))
    return freed_from


def release_for_reshape(conn: Connection, requests: list[ConsumerAllocations]) -> set[int]:
    """Check the consumers' generations and take their allocations off the books.

    The reshaper does this before it rewrites inventories, so that inventory can move from one
    provider to another underneath allocations that move with it.  Returns the providers of the
    consumers whose allocations the reshape empties, for ``replace_allocations``.
    """
    for request in sorted(requests, key=lambda r: r.consumer_uuid):
        _check_consumer_generation(consumer_store.get_consumer(conn, request.consumer_uuid), request)
    emptied_from: set[int] = set()
    for request in sorted(requests, key=lambda r: r.consumer_uuid):
        freed_from = _remove_allocations(conn, request.consumer_uuid)
        if not any(request.allocations.values()):
            emptied_from |= freed_from
    return emptied_from


def replace_allocations(
    conn: Connection,
    requests: list[ConsumerAllocations],
    *,
    emptied_from: Collection[int] = (),
    provider_ids: Mapping[str, int] | None = None,
    new_consumers: bool = False,
) -> None:
    """Replace the allocations of every consumer in ``requests`` at once, or of none.

    ``emptied_from``: the providers of consumers this write empties whose allocations were already
    taken off the books (``release_for_reshape``); they count as written to, as those the write
    itself empties do. ``provider_ids``: the row ids of providers the caller has just read (a pick's
    search), by uuid, which the write then does not look up; a provider deleted since has no
    inventory left to lock, and the write is refused (409) as for any allocation without one.
    ``new_consumers``: every consumer must be new (a pick's); one that exists is refused (409
    ``placement.concurrent_update``) by its row's insert, without a look for it first.
    """
    requests = sorted(requests, key=lambda r: r.consumer_uuid)
    targets = _resolve_targets(conn, requests, provider_ids or {})
    now = db_time(conn, utcnow())
    # SQLite: new consumers' rows go in after their allocations. Its quota triggers run for each row
    # as it is written, and count an allocation only once its consumer's row is there: the consumer's
    # own trigger then counts all it holds in two statements, where each allocation row's would
    # have taken four, inside the write lock every writer waits for. (PostgreSQL's triggers count a
    # statement's rows together, at its end.)
    consumers_after = new_consumers and conn.dialect.name == "sqlite"
    emptied = set(emptied_from)
    if not consumers_after:
        emptied |= _write_consumers(conn, requests, now, new_consumers)
    wanted, rows_to_insert = _wanted_amounts(requests, targets, now)
    # Each provider's generation moves once: those that receive allocations move below.
    left_alone = emptied - {provider_id for provider_id, _ in wanted}
    if left_alone:
        execute(conn, _TOUCH_PROVIDERS, (now,), ids=sorted(left_alone))
    if not wanted:
        return
    inventory_rows = _lock_inventories(conn, wanted)
    _check_unit_constraints(rows_to_insert, inventory_rows, targets)
    _take_capacity(conn, wanted, inventory_rows, targets, now)
    insert_rows(conn, _INSERT, _INSERTED_ROW, rows_to_insert)
    if consumers_after:
        _write_consumers(conn, requests, now, new_consumers)


@dataclass
class _Targets:
    """The providers and resource classes a write names, by uuid and name, with their row ids."""

    provider_ids: dict[str, int]
    class_ids: dict[str, int]

    def no_inventory(self, key: tuple[int, int]) -> Conflict:
        rc_name, provider_uuid = self._names(key)
        return Conflict(
            f"Unable to allocate inventory: Inventory for '{rc_name}' on resource provider '{provider_uuid}' invalid.",
            reason=error_codes.REASON_NO_INVENTORY,
        )

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
        provider_uuid = next(uuid for uuid, id_ in self.provider_ids.items() if id_ == provider_id)
        rc_name = next(name for name, id_ in self.class_ids.items() if id_ == rc_id)
        return rc_name, provider_uuid


def _resolve_targets(conn: Connection, requests: list[ConsumerAllocations], known: Mapping[str, int]) -> _Targets:
    """Every provider and resource class named must exist (400 otherwise)."""
    provider_uuids = {uuid for r in requests for uuid in r.allocations}
    provider_ids: dict[str, int]
    if provider_uuids <= known.keys():
        provider_ids = {uuid: known[uuid] for uuid in provider_uuids}
    else:
        provider_ids = dict(fetch(conn, _PROVIDERS, ids=sorted(provider_uuids))) if provider_uuids else {}
    missing = sorted(provider_uuids - provider_ids.keys())
    if missing:
        raise BadRequest(f"Allocation for resource provider '{missing[0]}' that does not exist.")
    class_names = {rc for r in requests for by_rc in r.allocations.values() for rc in by_rc}
    class_ids = names.resource_class_ids(conn, class_names)
    for request in requests:
        for rc in (rc for by_rc in request.allocations.values() for rc in by_rc if rc not in class_ids):
            raise BadRequest(
                f"Unable to allocate inventory for consumer {request.consumer_uuid}: No such resource class {rc}."
            )
    return _Targets(provider_ids, class_ids)


def _write_consumers(
    conn: Connection, requests: list[ConsumerAllocations], now: object, new_consumers: bool = False
) -> set[int]:
    """Check each consumer's generation, write its row, and take its old allocations off the books.

    Returns the providers of consumers whose allocations the write empties (``{"allocations": {}}``):
    as in the reference, such a write counts as a write to each provider the consumer leaves.
    """
    emptied_from: set[int] = set()
    owners = _OwnerIds(conn)
    if new_consumers:
        created = [request for request in requests if any(request.allocations.values())]
        if len(created) > 1:
            _create_consumers(conn, created, now, owners)
        elif created:
            _create_consumer(conn, created[0], now, owners)
        return emptied_from
    for request in requests:
        existing = consumer_store.get_consumer(conn, request.consumer_uuid)
        _check_consumer_generation(existing, request)
        # The consumer row is written first: its lock keeps a concurrent writer of the same consumer
        # from reading allocations this transaction is about to remove.
        has_new = any(request.allocations.values())
        if existing is not None:
            _update_consumer(conn, existing, request, now, owners, delete=not has_new)
            freed_from = _remove_allocations(conn, request.consumer_uuid)
            if not has_new:
                emptied_from |= freed_from
        elif has_new:
            # Allocations exist only with their consumer's row, so a new consumer has none to remove.
            _create_consumer(conn, request, now, owners)
    return emptied_from


_AllocationRow = tuple[int, str, int, int, object, object]
# id, provider id, class id, min_unit, max_unit, step_size
_InventoryRow = tuple[Any, ...]


def _wanted_amounts(
    requests: list[ConsumerAllocations], targets: _Targets, now: object
) -> tuple[dict[tuple[int, int], int], list[_AllocationRow]]:
    """What each (provider, class) must take in all, and the allocation rows to insert."""
    wanted: dict[tuple[int, int], int] = defaultdict(int)
    rows: list[_AllocationRow] = []
    for request in requests:
        for provider_uuid, by_rc in request.allocations.items():
            provider_id = targets.provider_ids[provider_uuid]
            for rc_name, amount in by_rc.items():
                rc_id = targets.class_ids[rc_name]
                wanted[(provider_id, rc_id)] += amount
                rows.append((provider_id, request.consumer_uuid, rc_id, amount, now, now))
    return wanted, rows


def _lock_inventories(conn: Connection, wanted: dict[tuple[int, int], int]) -> dict[tuple[int, int], _InventoryRow]:
    """The inventory rows of the providers written to, by (provider, class); locked on PostgreSQL, in id order."""
    lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
    provider_ids = sorted({provider_id for provider_id, _ in wanted})
    if len(provider_ids) == 1:
        rows = fetch(conn, _INVENTORIES_OF_ONE + lock, (provider_ids[0],))
    else:
        rows = fetch(conn, _INVENTORIES_OF + lock, ids=provider_ids)
    return {(row[1], row[2]): row for row in rows}


def _check_unit_constraints(
    rows_to_insert: list[_AllocationRow], inventory_rows: dict[tuple[int, int], _InventoryRow], targets: _Targets
) -> None:
    """Each allocation needs an inventory of its class and meets its unit constraints (409 otherwise)."""
    for provider_id, _consumer, rc_id, amount, _created, _updated in rows_to_insert:
        inventory = inventory_rows.get((provider_id, rc_id))
        if inventory is None:
            raise targets.no_inventory((provider_id, rc_id))
        _id, _provider, _class, min_unit, max_unit, step_size = inventory
        if not fits_units(amount, min_unit, max_unit, step_size):
            raise targets.breaks_unit_constraints((provider_id, rc_id))


def _take_capacity(
    conn: Connection,
    wanted: dict[tuple[int, int], int],
    inventory_rows: dict[tuple[int, int], _InventoryRow],
    targets: _Targets,
    now: object,
) -> None:
    """Raise each inventory's ``used`` while it stays within capacity, or refuse the whole write (409)."""
    ordered = sorted(wanted, key=lambda key: inventory_rows[key][0])
    if conn.dialect.name == "postgresql":
        taken: set[int] = set()
        for start in range(0, len(ordered), _TAKE_CHUNK):
            chunk = ordered[start : start + _TAKE_CHUNK]
            sql = _TAKE_ALL_PG.replace("{values}", ", ".join(["(?::bigint, ?::bigint)"] * len(chunk)))
            params = [value for key in chunk for value in (inventory_rows[key][0], wanted[key])]
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
            sql = _TAKE_ALL_SQLITE.replace("{values}", ", ".join(["(?, ?)"] * len(chunk)))
            params = [value for key in chunk for value in (inventory_rows[key][0], wanted[key])]
            taken.update(inventory_id for (inventory_id,) in fetch(conn, sql, params))
        for key in ordered:
            if inventory_rows[key][0] not in taken:
                raise targets.no_room(key)
        execute(conn, _TOUCH_PROVIDERS, (now,), ids=sorted({provider_id for provider_id, _ in wanted}))
        return
    for key in ordered:
        if execute(conn, _TAKE, (wanted[key], inventory_rows[key][0], wanted[key])) != 1:
            raise targets.no_room(key)
    for provider_id in sorted({provider_id for provider_id, _ in wanted}):
        execute(conn, _TOUCH_PROVIDER, (now, provider_id))


_OWNER_IDS = """
SELECT (SELECT id FROM projects WHERE external_id = ?), (SELECT id FROM users WHERE external_id = ?),
       (SELECT id FROM consumer_types WHERE name = ?)"""


# How a project, user or consumer type row id is found (or created) by its external name.
_Lookup = Callable[[Connection, str], int]


class _OwnerIds:
    """Row ids of projects, users and consumer types, looked up (or created) once per write: a
    batch of ``POST /allocations`` usually names the same few for hundreds of consumers."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.found: dict[tuple[_Lookup, str], int] = {}

    def known(self, project: str, user: str, consumer_type: str | None) -> bool:
        """Whether the three were looked up already (the later consumers of a batch)."""
        return (
            (consumer_store.project_pk, project) in self.found
            and (consumer_store.user_pk, user) in self.found
            and (consumer_type is None or (consumer_store.consumer_type_pk, consumer_type) in self.found)
        )

    def prefetch(self, project: str | None, user: str | None, consumer_type: str | None) -> None:
        """Look the three up in one round trip (a new consumer needs all of them)."""
        keys: tuple[tuple[_Lookup, str | None], ...] = (
            (consumer_store.project_pk, project),
            (consumer_store.user_pk, user),
            (consumer_store.consumer_type_pk, consumer_type),
        )
        if all(key in self.found for key in keys):
            return
        ids = fetch(self.conn, _OWNER_IDS, (project, user, consumer_type))[0]
        for key, found in zip(keys, ids, strict=True):
            if found is not None and key[1] is not None:
                self.found[(key[0], key[1])] = found

    def _get(self, lookup: _Lookup, value: str) -> int:
        key = (lookup, value)
        if key not in self.found:
            self.found[key] = lookup(self.conn, value)
        return self.found[key]

    def project(self, external_id: str) -> int:
        return self._get(consumer_store.project_pk, external_id)

    def user(self, external_id: str) -> int:
        return self._get(consumer_store.user_pk, external_id)

    def consumer_type(self, name: str) -> int:
        return self._get(consumer_store.consumer_type_pk, name)


def _create_consumer(conn: Connection, request: ConsumerAllocations, now: object, owners: _OwnerIds) -> None:
    project_id, user_id = _owners_named(request)
    try:
        # No savepoint: a clash ends this transaction anyway, with a 409.
        if not owners.known(project_id, user_id, request.consumer_type) and execute(
            conn,
            _INSERT_CONSUMER_OF_KNOWN_OWNERS,
            (
                request.consumer_uuid,
                now,
                now,
                user_id,
                request.consumer_type,
                project_id,
                request.consumer_type is None,
            ),
        ):
            return
        execute(conn, _INSERT_CONSUMER, _consumer_row(request, now, owners))
    except sa.exc.IntegrityError:
        raise ConcurrentUpdate(
            "consumer generation conflict - another request created this consumer meanwhile"
        ) from None


def _create_consumers(conn: Connection, requests: list[ConsumerAllocations], now: object, owners: _OwnerIds) -> None:
    """The rows of many new consumers (a gang's) in one statement, their owners looked up (or
    created) once for each distinct owner: a round trip for the lot instead of one per consumer."""
    rows = [_consumer_row(request, now, owners) for request in requests]
    try:
        insert_rows(conn, _INSERT_CONSUMERS, _INSERTED_CONSUMER, rows)
    except sa.exc.IntegrityError:
        raise ConcurrentUpdate(
            "consumer generation conflict - another request created one of these consumers meanwhile"
        ) from None


def _owners_named(request: ConsumerAllocations) -> tuple[str, str]:
    if request.project_id is None or request.user_id is None:
        # The API names Placement's incomplete-consumer ids when a body gives none.
        raise BadRequest(f"Consumer {request.consumer_uuid} needs a project and a user to be created.")
    return request.project_id, request.user_id


def _consumer_row(request: ConsumerAllocations, now: object, owners: _OwnerIds) -> tuple[object, ...]:
    """A new consumer's row, its owners' ids looked up (or created) through ``owners``."""
    project_id, user_id = _owners_named(request)
    owners.prefetch(project_id, user_id, request.consumer_type)
    return (
        request.consumer_uuid,
        owners.project(project_id),
        owners.user(user_id),
        owners.consumer_type(request.consumer_type) if request.consumer_type else None,
        now,
        now,
    )


def _update_consumer(
    conn: Connection,
    existing: Mapping[str, Any],
    request: ConsumerAllocations,
    now: object,
    owners: _OwnerIds,
    *,
    delete: bool,
) -> None:
    if delete:
        changed = execute(conn, _DELETE_CONSUMER, (existing["id"], existing["generation"]))
        execute(conn, _FORGET_PRIORITY, (request.consumer_uuid,))
    else:
        project: int | None = None  # NULL: keep the current one
        user: int | None = None
        consumer_type: int | None = None
        if request.project_id is not None and request.project_id != existing["project_id"]:
            project = owners.project(request.project_id)
        if request.user_id is not None and request.user_id != existing["user_id"]:
            user = owners.user(request.user_id)
        if request.consumer_type is not None and request.consumer_type != existing["consumer_type"]:
            consumer_type = owners.consumer_type(request.consumer_type)
        changed = execute(
            conn, _UPDATE_CONSUMER, (now, project, user, consumer_type, existing["id"], existing["generation"])
        )
    if changed != 1:
        raise ConcurrentUpdate(f"consumer generation conflict - the consumer {request.consumer_uuid} changed meanwhile")


def delete_consumer_allocations(conn: Connection, consumer_uuid: str) -> bool:
    """Remove every allocation of the consumer and the consumer itself; False when it had none."""
    existing = consumer_store.get_consumer(conn, consumer_uuid)
    if existing is not None:
        if execute(conn, _DELETE_CONSUMER, (existing["id"], existing["generation"])) != 1:
            raise ConcurrentUpdate(f"consumer generation conflict - the consumer {consumer_uuid} changed meanwhile")
        execute(conn, _FORGET_PRIORITY, (consumer_uuid,))
    return bool(_remove_allocations(conn, consumer_uuid))
