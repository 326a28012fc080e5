"""Allocations: what consumers hold, written atomically across providers.

A write replaces every allocation of the named consumers in one transaction:

1. the consumers' generations are compared and swapped (row lock on each consumer);
2. their old allocations are removed and the inventories' ``used`` counters lowered;
3. each new allocation raises its inventory's ``used`` with a conditional UPDATE that only matches
   while the result stays within capacity (``berth.store.placement.taking``).  On PostgreSQL the
   inventory rows are locked first (``FOR UPDATE`` in id order) and then raised together, the
   condition checked on the rows' newest versions, so two writers can never both take the last
   units; on SQLite writers are serialised by ``BEGIN IMMEDIATE``;
4. the generation of every provider that receives allocations is bumped, and the rows inserted.

Rows are touched in a fixed order (consumers by uuid, inventories by id) so that concurrent writers
on PostgreSQL queue behind each other instead of deadlocking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, RowMapping

from berth.domain.errors import BadRequest, ConcurrentUpdate
from berth.store.placement import consumers as consumer_store
from berth.store.placement import names
from berth.store.placement.lock_order import lock_inventories_of, lock_inventories_of_consumers
from berth.store.placement.providers import revise
from berth.store.placement.taking import (
    TOUCH_PROVIDERS,
    AllocationRow,
    NewConsumer,
    Targets,
    Wanted,
    take_and_insert,
)
from berth.store.rawsql import db_time, execute, fetch, fetch_records, insert_rows
from berth.store.schema import (
    allocations,
    consumers,
    resource_classes,
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


# Read for every GET /allocations/{consumer} and by every tracker's write of a consumer: fixed SQL
# sent to the driver (docs/architecture.md, "Hot paths send fixed SQL to the driver"), its
# timestamps typed as SQLAlchemy types them.
_SHOWN_OF_CONSUMER: Final = """
SELECT rp.uuid AS provider_uuid, rp.generation AS provider_generation, rc.name AS resource_class, a.used,
       a.created_at, a.updated_at
FROM allocations a
JOIN resource_providers rp ON rp.id = a.resource_provider_id
JOIN resource_classes rc ON rc.id = a.resource_class_id
WHERE a.consumer_id = ?
ORDER BY rp.id, rc.id"""


def allocations_of_consumer(conn: Connection, consumer_uuid: str) -> list[dict[str, Any]]:
    return fetch_records(conn, _SHOWN_OF_CONSUMER, (consumer_uuid,))


def allocations_on_provider(conn: Connection, provider_id: int) -> Sequence[RowMapping]:
    """The provider's allocations, each with its consumer's generation (None without a consumer row)."""
    return (
        conn.execute(
            sa.select(
                allocations.c.consumer_id,
                resource_classes.c.name.label("resource_class"),
                allocations.c.used,
                allocations.c.updated_at,
                consumers.c.generation.label("consumer_generation"),
            )
            .join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id)
            .outerjoin(consumers, consumers.c.uuid == allocations.c.consumer_id)
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
        # Placement words a null given for a consumer that exists as Python prints it.
        raise ConcurrentUpdate(f"consumer generation conflict - expected {existing['generation']} but got None")
    elif expected != existing["generation"]:
        raise ConcurrentUpdate(f"consumer generation conflict - expected {existing['generation']} but got {expected}")


_OF_CONSUMER = "SELECT resource_provider_id, resource_class_id, used FROM allocations WHERE consumer_id = ?"
_DELETE_OF_CONSUMER = "DELETE FROM allocations WHERE consumer_id = ?"
_FREE = "UPDATE inventories SET used = used - ? WHERE resource_provider_id = ? AND resource_class_id = ?"
_PROVIDERS = "SELECT uuid, id FROM resource_providers WHERE uuid IN {ids}"
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


def _remove_allocations(
    conn: Connection, consumer_uuid: str, *, locked: bool = False, freed_into: Wanted | None = None
) -> set[int]:
    """Take the consumer's allocations off the books; the providers they were on. ``locked``: the
    caller has locked the inventories of every provider it writes (else they are locked here);
    ``freed_into``: adds what was freed, by (provider, class)."""
    rows = fetch(conn, _OF_CONSUMER, (consumer_uuid,))
    if not rows:
        return set()
    freed_from = {provider_id for provider_id, _, _ in rows}
    if not locked:
        lock_inventories_of(conn, freed_from)
    execute(conn, _DELETE_OF_CONSUMER, (consumer_uuid,))
    freed: dict[tuple[int, int], int] = defaultdict(int)
    for provider_id, rc_id, used in rows:
        freed[(provider_id, rc_id)] += used
    for (provider_id, rc_id), amount in sorted(freed.items()):
        execute(conn, _FREE, (amount, provider_id, rc_id))
        if freed_into is not None:
            freed_into[(provider_id, rc_id)] = freed_into.get((provider_id, rc_id), 0) + amount
    # Freeing leaves generations alone, as in the reference, but changes what candidates see: the
    # provider rows after their inventories (berth.store.placement.lock_order).
    revise(conn, freed_from)
    return freed_from


def check_consumer_generations(conn: Connection, requests: list[ConsumerAllocations]) -> None:
    """Each consumer is still at the generation its request gives (409 otherwise)."""
    for request in sorted(requests, key=lambda r: r.consumer_uuid):
        _check_consumer_generation(consumer_store.get_consumer(conn, request.consumer_uuid), request)


def require_providers(conn: Connection, requests: list[ConsumerAllocations]) -> None:
    """Every provider the requests allocate from exists (400 otherwise)."""
    _provider_ids(conn, requests, {})


def release_for_reshape(conn: Connection, requests: list[ConsumerAllocations]) -> set[int]:
    """Check the consumers' generations and take their allocations off the books.

    The reshaper does this before it rewrites inventories, so that inventory can move from one
    provider to another underneath allocations that move with it.  Returns the providers of the
    consumers whose allocations the reshape empties, for ``replace_allocations``.
    """
    check_consumer_generations(conn, requests)
    lock_inventories_of_consumers(conn, [r.consumer_uuid for r in requests])
    emptied_from: set[int] = set()
    for request in sorted(requests, key=lambda r: r.consumer_uuid):
        freed_from = _remove_allocations(conn, request.consumer_uuid, locked=True)
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
    consumer_counted_by_writer: bool | None = None,
) -> None:
    """Replace the allocations of every consumer in ``requests`` at once, or of none.

    ``emptied_from``: the providers of consumers this write empties whose allocations were already
    taken off the books (``release_for_reshape``); they count as written to, as those the write
    itself empties do. ``provider_ids``: the row ids of providers the caller has just read (a pick's
    search), by uuid, which the write then does not look up; a provider deleted since has no
    inventory left to lock, and the write is refused (409) as for any allocation without one.
    ``new_consumers``: every consumer must be new (a pick's); one that exists is refused (409
    ``placement.concurrent_update``) by its row's insert, without a look for it first.
    ``consumer_counted_by_writer`` (PostgreSQL, one new consumer with allocations): its row is written
    by the statement that takes the capacity (``berth.store.placement.taking.NewConsumer``: the
    value says whether the writer counts its quota usage itself), or ``ConsumerNotWritten`` raised.
    """
    requests = sorted(requests, key=lambda r: r.consumer_uuid)
    try:
        targets = _resolve_targets(conn, requests, provider_ids or {})
    except BadRequest:
        # Placement compares the consumers' generations before it looks up the providers and
        # classes: a stale generation is the 409 a client refreshes and retries on, whatever else
        # its body names.
        if not new_consumers:
            check_consumer_generations(conn, requests)
        raise
    now = db_time(conn, utcnow())
    # SQLite: new consumers' rows go in after their allocations. Its quota triggers run for each row
    # as it is written, and count an allocation only once its consumer's row is there: the consumer's
    # own trigger then counts all it holds in two statements, where each allocation row's would
    # have taken four, inside the write lock every writer waits for. (PostgreSQL's triggers count a
    # statement's rows together, at its end.)
    consumers_after = new_consumers and conn.dialect.name == "sqlite"
    new_consumer = None
    if consumer_counted_by_writer is not None:
        assert new_consumers and len(requests) == 1 and any(requests[0].allocations.values())
        project_id, user_id = _owners_named(requests[0])
        new_consumer = NewConsumer(
            requests[0].consumer_uuid, project_id, user_id, requests[0].consumer_type, consumer_counted_by_writer
        )
    emptied = set(emptied_from)
    # What the write takes off the inventories as it replaces its consumers' allocations: as much may
    # be taken again there whatever the room (``take_and_insert``'s ``freed``).
    freed: Wanted = {}
    if not new_consumers:
        # What the write frees and what it takes, locked before it frees anything.
        lock_inventories_of_consumers(conn, [r.consumer_uuid for r in requests], targets.provider_ids.values())
    if not consumers_after and new_consumer is None:
        emptied |= _write_consumers(conn, requests, now, new_consumers, freed)
    wanted, rows_to_insert = _wanted_amounts(requests, targets, now)
    # Each provider's generation moves once: those that receive allocations move below.
    left_alone = emptied - {provider_id for provider_id, _ in wanted}
    if left_alone:
        execute(conn, TOUCH_PROVIDERS, (now,), ids=sorted(left_alone))
    if not wanted:
        return
    take_and_insert(conn, wanted, rows_to_insert, targets, now, new_consumer, freed)
    if consumers_after:
        _write_consumers(conn, requests, now, new_consumers)


def _resolve_targets(conn: Connection, requests: list[ConsumerAllocations], known: Mapping[str, int]) -> Targets:
    """Every provider and resource class named must exist (400 otherwise)."""
    provider_ids = _provider_ids(conn, requests, known)
    class_names = {rc for r in requests for by_rc in r.allocations.values() for rc in by_rc}
    class_ids = names.resource_class_ids(conn, class_names)
    for request in requests:
        for rc in (rc for by_rc in request.allocations.values() for rc in by_rc if rc not in class_ids):
            raise BadRequest(
                f"Unable to allocate inventory for consumer {request.consumer_uuid}: No such resource class {rc}."
            )
    return Targets(provider_ids, class_ids)


def _provider_ids(conn: Connection, requests: list[ConsumerAllocations], known: Mapping[str, int]) -> dict[str, int]:
    """The row ids of the providers the requests allocate from, by uuid (400 for one that does not
    exist); those in ``known`` are not looked up."""
    provider_uuids = {uuid for r in requests for uuid in r.allocations}
    provider_ids: dict[str, int]
    if provider_uuids <= known.keys():
        provider_ids = {uuid: known[uuid] for uuid in provider_uuids}
    else:
        provider_ids = dict(fetch(conn, _PROVIDERS, ids=sorted(provider_uuids))) if provider_uuids else {}
    missing = sorted(provider_uuids - provider_ids.keys())
    if missing:
        raise BadRequest(f"Allocation for resource provider '{missing[0]}' that does not exist.")
    return provider_ids


def _write_consumers(
    conn: Connection,
    requests: list[ConsumerAllocations],
    now: object,
    new_consumers: bool = False,
    freed: Wanted | None = None,
) -> set[int]:
    """Check each consumer's generation, write its row, and take its old allocations off the books
    (adding what that frees to ``freed``).

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
            freed_from = _remove_allocations(conn, request.consumer_uuid, locked=True, freed_into=freed)
            if not has_new:
                emptied_from |= freed_from
        elif has_new:
            # Allocations exist only with their consumer's row, so a new consumer has none to remove.
            _create_consumer(conn, request, now, owners)
    return emptied_from


def _wanted_amounts(
    requests: list[ConsumerAllocations], targets: Targets, now: object
) -> tuple[dict[tuple[int, int], int], list[AllocationRow]]:
    """What each (provider, class) must take in all, and the allocation rows to insert."""
    wanted: dict[tuple[int, int], int] = defaultdict(int)
    rows: list[AllocationRow] = []
    for request in requests:
        for provider_uuid, by_rc in request.allocations.items():
            provider_id = targets.provider_ids[provider_uuid]
            for rc_name, amount in by_rc.items():
                rc_id = targets.class_ids[rc_name]
                wanted[(provider_id, rc_id)] += amount
                rows.append((provider_id, request.consumer_uuid, rc_id, amount, now, now))
    return wanted, rows


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
