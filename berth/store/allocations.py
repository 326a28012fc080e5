"""Allocations: what consumers hold, written atomically across providers.

A write replaces every allocation of the named consumers in one transaction:

1. the consumers' generations are compared and swapped (row lock on each consumer);
2. their old allocations are removed and the inventories' ``used`` counters lowered;
3. each new allocation raises its inventory's ``used`` with a conditional UPDATE that only matches
   while the result stays within capacity.  On PostgreSQL the UPDATE locks the inventory row and
   re-reads it after any concurrent writer commits, so two writers can never both take the last units;
   on SQLite writers are serialised by ``BEGIN IMMEDIATE``;
4. the generation of every provider that receives allocations is bumped.

Rows are touched in a fixed order (consumers by uuid, inventories by id) so that concurrent writers
on PostgreSQL queue behind each other instead of deadlocking.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import sqlalchemy as sa

from berth.domain.errors import BadRequest, ConcurrentUpdate, Conflict
from berth.store import consumers as consumer_store
from berth.store import names
from berth.store.providers import get_provider
from berth.store.schema import (
    allocations, consumers, inventories, resource_classes, resource_providers as rp,
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


def allocations_of_consumer(conn, consumer_uuid):
    return conn.execute(
        sa.select(rp.c.uuid.label("provider_uuid"), rp.c.generation.label("provider_generation"),
                  resource_classes.c.name.label("resource_class"), allocations.c.used,
                  allocations.c.created_at, allocations.c.updated_at)
        .select_from(allocations.join(rp, rp.c.id == allocations.c.resource_provider_id)
                     .join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id))
        .where(allocations.c.consumer_id == consumer_uuid)
        .order_by(rp.c.id, resource_classes.c.id)
    ).mappings().all()


def allocations_on_provider(conn, provider_id):
    return conn.execute(
        sa.select(allocations.c.consumer_id, resource_classes.c.name.label("resource_class"),
                  allocations.c.used, allocations.c.updated_at)
        .join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id)
        .where(allocations.c.resource_provider_id == provider_id)
        .order_by(allocations.c.consumer_id, resource_classes.c.id)
    ).mappings().all()


def _check_consumer_generation(existing, request: ConsumerAllocations):
    if request.consumer_generation is UNSET:
        return
    expected = request.consumer_generation
    if existing is None:
        if expected is not None:
            raise ConcurrentUpdate(
                f"consumer generation conflict - expected null but got {expected}"
            )
    elif expected is None:
        raise ConcurrentUpdate(
            f"consumer generation conflict - expected {existing['generation']} but got null"
        )
    elif expected != existing["generation"]:
        raise ConcurrentUpdate(
            f"consumer generation conflict - expected {existing['generation']} but got {expected}"
        )


# Built once: constructing statements costs more than running them on this path.
_OF_CONSUMER = sa.select(allocations.c.resource_provider_id, allocations.c.resource_class_id,
                         allocations.c.used).where(allocations.c.consumer_id == sa.bindparam("b_consumer"))
_DELETE_OF_CONSUMER = allocations.delete().where(allocations.c.consumer_id == sa.bindparam("b_consumer"))
_FREE = (
    inventories.update()
    .where(inventories.c.resource_provider_id == sa.bindparam("b_provider"),
           inventories.c.resource_class_id == sa.bindparam("b_class"))
    .values(used=inventories.c.used - sa.bindparam("b_amount"))
)
_INVENTORIES_OF = sa.select(inventories).where(
    inventories.c.resource_provider_id.in_(sa.bindparam("b_providers", expanding=True)))
_TAKE = (
    inventories.update()
    .where(inventories.c.id == sa.bindparam("b_id"),
           (inventories.c.total - inventories.c.reserved) * inventories.c.allocation_ratio
           >= inventories.c.used + sa.bindparam("b_amount"))
    .values(used=inventories.c.used + sa.bindparam("b_amount"))
)
_INSERT = allocations.insert()
_INSERT_CONSUMER = consumers.insert()
# Allocation writes take no provider generation from the client (the reference ignores one), so the
# bump only tells other writers of the provider that something changed.
_TOUCH_PROVIDER = (
    rp.update().where(rp.c.id == sa.bindparam("b_id"))
    .values(generation=rp.c.generation + 1, updated_at=sa.bindparam("b_now"))
)


def _remove_allocations(conn, consumer_uuid):
    rows = conn.execute(_OF_CONSUMER, {"b_consumer": consumer_uuid}).all()
    if not rows:
        return set()
    conn.execute(_DELETE_OF_CONSUMER, {"b_consumer": consumer_uuid})
    freed = defaultdict(int)
    for provider_id, rc_id, used in rows:
        freed[(provider_id, rc_id)] += used
    for (provider_id, rc_id), amount in sorted(freed.items()):
        conn.execute(_FREE, {"b_provider": provider_id, "b_class": rc_id, "b_amount": amount})
    return {provider_id for provider_id, _, _ in rows}


def release_for_reshape(conn, requests: list[ConsumerAllocations]) -> None:
    """Check the consumers' generations and take their allocations off the books.

    The reshaper does this before it rewrites inventories, so that inventory can move from one
    provider to another underneath allocations that move with it.
    """
    for request in sorted(requests, key=lambda r: r.consumer_uuid):
        _check_consumer_generation(consumer_store.get_consumer(conn, request.consumer_uuid), request)
    for request in sorted(requests, key=lambda r: r.consumer_uuid):
        _remove_allocations(conn, request.consumer_uuid)


def replace_allocations(conn, requests: list[ConsumerAllocations]) -> None:
    """Replace the allocations of every consumer in ``requests`` at once, or of none."""
    requests = sorted(requests, key=lambda r: r.consumer_uuid)
    provider_uuids = {uuid for r in requests for uuid in r.allocations}
    providers = {}
    for uuid in sorted(provider_uuids):
        row = get_provider(conn, uuid)
        if row is None:
            raise BadRequest(f"Allocation for resource provider '{uuid}' that does not exist.")
        providers[uuid] = row
    class_names = {rc for r in requests for by_rc in r.allocations.values() for rc in by_rc}
    class_ids = names.resource_class_ids(conn, class_names)
    for request in requests:
        for by_rc in request.allocations.values():
            for rc in by_rc:
                if rc not in class_ids:
                    raise BadRequest(f"Unable to allocate inventory for consumer {request.consumer_uuid}: "
                                     f"No such resource class {rc}.")

    now = utcnow()
    owners = _OwnerIds(conn)
    for request in requests:
        existing = consumer_store.get_consumer(conn, request.consumer_uuid)
        _check_consumer_generation(existing, request)
        # The consumer row is written first: its lock keeps a concurrent writer of the same consumer
        # from reading allocations this transaction is about to remove.
        has_new = any(request.allocations.values())
        if existing is not None:
            _update_consumer(conn, existing, request, now, owners, delete=not has_new)
        elif has_new:
            _create_consumer(conn, request, now, owners)
        _remove_allocations(conn, request.consumer_uuid)

    # Add the new allocations, one inventory row at a time, in a fixed order.
    wanted = defaultdict(int)
    rows_to_insert = []
    for request in requests:
        for provider_uuid, by_rc in request.allocations.items():
            provider = providers[provider_uuid]
            for rc_name, amount in by_rc.items():
                wanted[(provider["id"], class_ids[rc_name])] += amount
                rows_to_insert.append({
                    "resource_provider_id": provider["id"], "consumer_id": request.consumer_uuid,
                    "resource_class_id": class_ids[rc_name], "used": amount,
                    "created_at": now, "updated_at": now,
                })
    if not wanted:
        return
    inventory_rows = {
        (row.resource_provider_id, row.resource_class_id): row
        for row in conn.execute(_INVENTORIES_OF, {"b_providers": sorted({pid for pid, _ in wanted})})
    }
    by_id = {p["id"]: p for p in providers.values()}
    rc_names = {v: k for k, v in class_ids.items()}
    for row in rows_to_insert:
        inventory = inventory_rows.get((row["resource_provider_id"], row["resource_class_id"]))
        provider, rc_name = by_id[row["resource_provider_id"]], rc_names[row["resource_class_id"]]
        if inventory is None:
            raise Conflict(
                f"Unable to allocate inventory: Inventory for '{rc_name}' on resource provider "
                f"'{provider['uuid']}' invalid."
            )
        amount = row["used"]
        if not (inventory.min_unit <= amount <= inventory.max_unit and amount % inventory.step_size == 0):
            raise Conflict(
                f"Unable to allocate inventory: Unable to create allocation for '{rc_name}' on resource "
                f"provider '{provider['uuid']}'. The requested amount would violate inventory constraints."
            )
    for key in sorted(wanted, key=lambda k: inventory_rows[k].id):
        inventory = inventory_rows[key]
        amount = wanted[key]
        result = conn.execute(_TAKE, {"b_id": inventory.id, "b_amount": amount})
        if result.rowcount != 1:
            provider = by_id[key[0]]
            raise Conflict(
                f"Unable to allocate inventory: Unable to create allocation for '{rc_names[key[1]]}' on "
                f"resource provider '{provider['uuid']}'. The requested amount would exceed the capacity."
            )
    conn.execute(_INSERT, rows_to_insert)
    for provider_id in sorted({pid for pid, _ in wanted}):
        conn.execute(_TOUCH_PROVIDER, {"b_id": provider_id, "b_now": now})


class _OwnerIds:
    """Row ids of projects, users and consumer types, looked up (or created) once per write: a
    batch of ``POST /allocations`` usually names the same few for hundreds of consumers."""

    def __init__(self, conn):
        self.conn = conn
        self.found = {}

    def _get(self, lookup, value):
        key = (lookup, value)
        if key not in self.found:
            self.found[key] = lookup(self.conn, value)
        return self.found[key]

    def project(self, external_id):
        return self._get(consumer_store.project_pk, external_id)

    def user(self, external_id):
        return self._get(consumer_store.user_pk, external_id)

    def consumer_type(self, name):
        return self._get(consumer_store.consumer_type_pk, name)


def _create_consumer(conn, request, now, owners):
    values = dict(
        uuid=request.consumer_uuid, generation=1, created_at=now, updated_at=now,
        project_id=owners.project(request.project_id),
        user_id=owners.user(request.user_id),
        consumer_type_id=owners.consumer_type(request.consumer_type) if request.consumer_type else None,
    )
    try:
        # No savepoint: a clash ends this transaction anyway, with a 409.
        conn.execute(_INSERT_CONSUMER, values)
    except sa.exc.IntegrityError:
        raise ConcurrentUpdate(
            "consumer generation conflict - another request created this consumer meanwhile"
        ) from None


def _update_consumer(conn, existing, request, now, owners, *, delete):
    if delete:
        result = conn.execute(consumers.delete().where(
            consumers.c.id == existing["id"], consumers.c.generation == existing["generation"]))
    else:
        values = {"generation": consumers.c.generation + 1, "updated_at": now}
        if request.project_id is not None and request.project_id != existing["project_id"]:
            values["project_id"] = owners.project(request.project_id)
        if request.user_id is not None and request.user_id != existing["user_id"]:
            values["user_id"] = owners.user(request.user_id)
        if request.consumer_type is not None and request.consumer_type != existing["consumer_type"]:
            values["consumer_type_id"] = owners.consumer_type(request.consumer_type)
        result = conn.execute(consumers.update().where(
            consumers.c.id == existing["id"], consumers.c.generation == existing["generation"]
        ).values(**values))
    if result.rowcount != 1:
        raise ConcurrentUpdate(
            f"consumer generation conflict - the consumer {request.consumer_uuid} changed meanwhile"
        )


def delete_consumer_allocations(conn, consumer_uuid) -> bool:
    """Remove every allocation of the consumer and the consumer itself; False when it had none."""
    existing = consumer_store.get_consumer(conn, consumer_uuid)
    if existing is not None:
        result = conn.execute(consumers.delete().where(
            consumers.c.id == existing["id"], consumers.c.generation == existing["generation"]))
        if result.rowcount != 1:
            raise ConcurrentUpdate(
                f"consumer generation conflict - the consumer {consumer_uuid} changed meanwhile")
    return bool(_remove_allocations(conn, consumer_uuid))
