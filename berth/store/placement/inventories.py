"""Inventories of a provider: what it has of each resource class, and how it may be allocated."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection

from berth.domain import error_codes
from berth.domain.capacity import INVENTORY_FIELDS, Inventory
from berth.domain.errors import BadRequest, ConcurrentUpdate, Conflict, InventoryInUse, NotFound
from berth.store.placement import names
from berth.store.placement.lock_order import lock_inventories_of
from berth.store.placement.providers import (
    GENERATION_CONFLICT,
    bump_generation,
    bump_generation_by_uuid,
    require_provider,
)
from berth.store.rawsql import db_time, execute, execute_many, fetch, fetch_records, values_rows
from berth.store.util import utcnow

LOG = logging.getLogger(__name__)


_OF_PROVIDER = """
SELECT inv.id, inv.resource_provider_id, inv.resource_class_id, inv.total, inv.reserved, inv.min_unit,
       inv.max_unit, inv.step_size, inv.allocation_ratio, inv.used, inv.created_at, inv.updated_at,
       rc.name AS resource_class
FROM inventories inv JOIN resource_classes rc ON rc.id = inv.resource_class_id
WHERE inv.resource_provider_id = ?
ORDER BY rc.id"""
_INSERT = """
INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit,
                         step_size, allocation_ratio, used, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)"""
_UPDATE = """
UPDATE inventories SET total = ?, reserved = ?, min_unit = ?, max_unit = ?, step_size = ?,
                       allocation_ratio = ?, updated_at = ?
WHERE id = ?"""
_DELETE_UNUSED = "DELETE FROM inventories WHERE id = ? AND used = 0"


def inventory_of(row: Mapping[str, Any]) -> Inventory:
    return Inventory(**{f: row[f] for f in INVENTORY_FIELDS})


def list_inventories(conn: Connection, provider_id: int) -> dict[str, dict[str, Any]]:
    """Inventory rows of a provider keyed by resource class name, in class order."""
    return {row["resource_class"]: row for row in fetch_records(conn, _OF_PROVIDER, (provider_id,))}


def _class_ids(
    conn: Connection, provider: Mapping[str, Any], class_names: Iterable[str], creating: bool = False
) -> dict[str, int]:
    class_names = list(class_names)
    ids = names.resource_class_ids(conn, class_names)
    unknown = sorted(set(class_names) - set(ids))
    if unknown:
        if creating:
            raise BadRequest(
                f"Unable to create inventory for resource provider {provider['uuid']}: "
                f"No such resource class {unknown[0]}."
            )
        raise BadRequest(
            f"Unknown resource class in inventory for resource provider {provider['uuid']}: "
            f"No such resource class {unknown[0]}."
        )
    return ids


def _validate(
    provider: Mapping[str, Any], rc_name: str, inventory: Inventory, reserved_can_be_total: bool, action: str = "update"
) -> None:
    """Placement's own refusals of an inventory: made before the provider's generation is compared."""
    _refuse(provider, rc_name, inventory.invalid_reason(reserved_can_be_total), action)


def _validate_allocatable(
    provider: Mapping[str, Any], inventories: Mapping[str, Inventory], action: str = "update"
) -> None:
    """Berth's own refusal of an inventory that could never be allocated from: made after the
    provider's generation is compared, so that a stale write is a 409 as it is in Placement."""
    for rc_name, inventory in inventories.items():
        _refuse(provider, rc_name, inventory.unallocatable_reason(), action)


def _refuse(provider: Mapping[str, Any], rc_name: str, reason: str | None, action: str) -> None:
    if reason:
        raise BadRequest(
            f"Unable to {action} inventory for resource provider {provider['uuid']}: "
            f"Invalid inventory for '{rc_name}' on resource provider '{provider['uuid']}'. {reason}"
        )


def _warn_if_over_used(provider: Mapping[str, Any], rc_name: str, inventory: Inventory, used: int) -> None:
    # Allowed, as in the reference: a host whose disk shrank or whose reservation grew must still
    # be able to report it.  New allocations are refused until usage is back under capacity.
    if used > inventory.capacity:
        LOG.warning(
            "resource provider %s is now over capacity for %s: %d used of %d",
            provider["uuid"],
            rc_name,
            used,
            inventory.capacity,
        )


# How each operation words the refusal, as the reference does: clients show the text to people, and
# Nova matches on the prefix of a replacement's refusal.
UPDATE_REFUSAL = "update conflict: "
DELETE_ALL_REFUSAL = ""


def delete_refusal(rc_name: str) -> str:
    return f"Unable to delete inventory of class {rc_name}: "


def _in_use_error(provider: Mapping[str, Any], rc_names: Sequence[str], refusal: str) -> InventoryInUse:
    return InventoryInUse(
        f"{refusal}Inventory for '{', '.join(rc_names)}' on resource provider '{provider['uuid']}' in use."
    )


# PUT .../inventories on PostgreSQL as one statement, so that it runs without BEGIN and COMMIT: one
# round trip instead of six.  Every change hangs on the generation compare-and-swap (``bumped``), which
# also refuses the whole write when an inventory to be removed is in use.  The statement's snapshot is
# enough for that test: anything that raises ``used`` moves the provider's generation in the same
# transaction, so a claim that committed since the snapshot makes the compare-and-swap miss.
#
# The new rows come as a VALUES list (one statement text per number of classes), not as arrays to
# unnest: PostgreSQL then knows how many rows there are and keeps one generic plan for the prepared
# statement, where with arrays it planned every run again (0.4 ms of its CPU per PUT), and psycopg
# spends less on VALUES parameters than on arrays.
_REPLACE_PG = """
WITH new (resource_class_id, total, reserved, min_unit, max_unit, step_size, allocation_ratio) AS (
    {new_rows}
),
target AS (SELECT id, generation FROM resource_providers WHERE uuid = ?),
locked AS MATERIALIZED (
    SELECT i.id FROM inventories i JOIN target t ON t.id = i.resource_provider_id ORDER BY i.id FOR UPDATE OF i
),
in_use AS (
    SELECT i.resource_class_id FROM inventories i JOIN target t ON t.id = i.resource_provider_id
    WHERE i.used > 0 AND i.resource_class_id NOT IN (SELECT resource_class_id FROM new)
),
bumped AS (
    UPDATE resource_providers SET generation = generation + 1, revision = revision + 1, updated_at = ?
    WHERE uuid = ? AND generation = ? AND NOT EXISTS (SELECT 1 FROM in_use)
      -- The provider's inventory rows locked before its own row (berth.store.placement.lock_order).
      AND (SELECT count(*) FROM locked) >= 0
    RETURNING id
),
removed AS (
    DELETE FROM inventories i USING bumped b
    WHERE i.resource_provider_id = b.id AND i.used = 0
      AND i.resource_class_id NOT IN (SELECT resource_class_id FROM new)
),
changed AS (
    UPDATE inventories i SET total = n.total, reserved = n.reserved, min_unit = n.min_unit,
        max_unit = n.max_unit, step_size = n.step_size, allocation_ratio = n.allocation_ratio, updated_at = ?
    FROM new n, bumped b
    WHERE i.resource_provider_id = b.id AND i.resource_class_id = n.resource_class_id
      AND (i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio)
          IS DISTINCT FROM (n.total, n.reserved, n.min_unit, n.max_unit, n.step_size, n.allocation_ratio)
    RETURNING i.resource_class_id, i.used
),
added AS (
    INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit,
                             step_size, allocation_ratio, used, created_at, updated_at)
    SELECT b.id, n.resource_class_id, n.total, n.reserved, n.min_unit, n.max_unit, n.step_size,
           n.allocation_ratio, 0, ?, ?
    FROM new n, bumped b
    WHERE NOT EXISTS (SELECT 1 FROM inventories i
                      WHERE i.resource_provider_id = b.id AND i.resource_class_id = n.resource_class_id)
)
SELECT (SELECT id FROM bumped), (SELECT generation FROM target),
       ARRAY(SELECT resource_class_id FROM in_use ORDER BY resource_class_id),
       ARRAY(SELECT ARRAY[resource_class_id, used] FROM changed WHERE used > 0)"""


@lru_cache(maxsize=64)
def _replace_pg(classes: int) -> str:
    return _REPLACE_PG.format(
        new_rows=values_rows(
            "(?::integer, ?::bigint, ?::bigint, ?::bigint, ?::bigint, ?::bigint, ?::float8)",
            classes,
            "SELECT NULL::integer, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::float8 WHERE false",
        )
    )


def replace_inventories_of(
    conn: Connection, uuid: str, generation: int, new: dict[str, Inventory], *, reserved_can_be_total: bool
) -> int:
    """PUT .../inventories: the provider's inventories become exactly ``new``; the new generation.

    Refusals come in the reference's order: an unknown provider, then a bad body, then a stale
    generation, then an inventory in use.  One statement on PostgreSQL (see ``_REPLACE_PG``).
    """
    if conn.dialect.name != "postgresql":
        provider, bumped = bump_generation_by_uuid(conn, uuid, generation)
        return replace_inventories(
            conn, provider, generation, new, reserved_can_be_total=reserved_can_be_total, already_bumped=bumped
        )
    ids = names.resource_class_ids(conn, new)
    if len(ids) < len(new) or any(inv.invalid_reason(reserved_can_be_total) for inv in new.values()):
        found = require_provider(conn, uuid)
        _class_ids(conn, found, new)
        for rc_name, inventory in new.items():
            _validate(found, rc_name, inventory, reserved_can_be_total)
    if any(inv.unallocatable_reason() for inv in new.values()):
        found = require_provider(conn, uuid)
        if found["generation"] != generation:
            raise ConcurrentUpdate(GENERATION_CONFLICT)
        _validate_allocatable(found, new)
    values = [v for rc, inv in new.items() for v in (ids[rc], *(getattr(inv, f) for f in INVENTORY_FIELDS))]
    now = db_time(conn, utcnow())
    bumped_id, found_generation, in_use, over = fetch(
        conn, _replace_pg(len(new)), (*values, uuid, now, uuid, generation, now, now, now)
    )[0]
    provider = {"uuid": uuid}
    if bumped_id is None:
        if found_generation is None:
            require_provider(conn, uuid)
        if found_generation != generation or not in_use:
            # Without an inventory in use, the generation moved after the statement's snapshot.
            raise ConcurrentUpdate(GENERATION_CONFLICT)
        rc_names = names.resource_class_names_of(conn, in_use)
        raise _in_use_error(provider, [rc_names[rc] for rc in in_use], UPDATE_REFUSAL)
    if over:
        rc_names = names.resource_class_names_of(conn, [rc for rc, _ in over])
        for rc, used in over:
            _warn_if_over_used(provider, rc_names[rc], new[rc_names[rc]], used)
    return generation + 1


def replace_inventories(
    conn: Connection,
    provider: dict[str, Any],
    generation: int,
    new: dict[str, Inventory],
    *,
    reserved_can_be_total: bool,
    already_bumped: bool = False,
) -> int:
    """Make the provider's inventories exactly ``new`` (PUT .../inventories).  ``already_bumped``:
    the caller has moved the generation from ``generation`` on already."""
    ids = _class_ids(conn, provider, new)
    for rc_name, inventory in new.items():
        _validate(provider, rc_name, inventory, reserved_can_be_total)
    if already_bumped:
        new_generation = generation + 1
    else:
        lock_inventories_of(conn, [provider["id"]])
        new_generation = bump_generation(conn, provider, generation)
    _validate_allocatable(provider, new)
    current = list_inventories(conn, provider["id"])
    in_use = [rc for rc, row in current.items() if rc not in new and row["used"]]
    if in_use:
        raise _in_use_error(provider, in_use, UPDATE_REFUSAL)
    for rc_name, row in current.items():
        if rc_name not in new:
            _delete_unused(conn, provider, [(rc_name, row)], UPDATE_REFUSAL)
    now = db_time(conn, utcnow())
    added: list[tuple[Any, ...]] = []
    for rc_name, inventory in new.items():
        existing = current.get(rc_name)
        values = tuple(getattr(inventory, f) for f in INVENTORY_FIELDS)
        if existing is None:
            added.append((provider["id"], ids[rc_name], *values, now, now))
        else:
            _warn_if_over_used(provider, rc_name, inventory, existing["used"])
            if any(existing[f] != v for f, v in zip(INVENTORY_FIELDS, values, strict=True)):
                execute(conn, _UPDATE, (*values, now, existing["id"]))
    execute_many(conn, _INSERT, added)
    return new_generation


def add_inventory(
    conn: Connection,
    provider: dict[str, Any],
    generation: int,
    rc_name: str,
    inventory: Inventory,
    *,
    reserved_can_be_total: bool,
) -> int:
    ids = _class_ids(conn, provider, [rc_name], creating=True)
    _validate(provider, rc_name, inventory, reserved_can_be_total, action="create")
    lock_inventories_of(conn, [provider["id"]])
    new_generation = bump_generation(conn, provider, generation)
    _validate_allocatable(provider, {rc_name: inventory}, action="create")
    if rc_name in list_inventories(conn, provider["id"]):
        raise Conflict(
            f"Update conflict: Inventory for '{rc_name}' on resource provider '{provider['uuid']}' already exists.",
            code=error_codes.CONCURRENT_UPDATE,
        )
    now = db_time(conn, utcnow())
    execute(conn, _INSERT, (provider["id"], ids[rc_name], *(getattr(inventory, f) for f in INVENTORY_FIELDS), now, now))
    return new_generation


def update_inventory(
    conn: Connection,
    provider: dict[str, Any],
    generation: int,
    rc_name: str,
    inventory: Inventory,
    *,
    reserved_can_be_total: bool,
) -> int:
    _class_ids(conn, provider, [rc_name])
    _validate(provider, rc_name, inventory, reserved_can_be_total)
    lock_inventories_of(conn, [provider["id"]])
    new_generation = bump_generation(conn, provider, generation)
    _validate_allocatable(provider, {rc_name: inventory})
    row = list_inventories(conn, provider["id"]).get(rc_name)
    if row is None:
        raise BadRequest(
            f"No inventory record with resource class for resource provider {provider['uuid']}: "
            f"No inventory of class {rc_name} found."
        )
    _warn_if_over_used(provider, rc_name, inventory, row["used"])
    execute(conn, _UPDATE, (*(getattr(inventory, f) for f in INVENTORY_FIELDS), db_time(conn, utcnow()), row["id"]))
    return new_generation


def delete_inventory(conn: Connection, provider: dict[str, Any], rc_name: str) -> None:
    row = list_inventories(conn, provider["id"]).get(rc_name)
    if row is None:
        raise NotFound(f"No inventory of class {rc_name} found for delete")
    if row["used"]:
        raise _in_use_error(provider, [rc_name], delete_refusal(rc_name))
    lock_inventories_of(conn, [provider["id"]])
    bump_generation(conn, provider)
    _delete_unused(conn, provider, [(rc_name, row)], delete_refusal(rc_name))


def delete_all_inventories(conn: Connection, provider: dict[str, Any], generation: int | None = None) -> None:
    current = list_inventories(conn, provider["id"])
    in_use = [rc for rc, row in current.items() if row["used"]]
    if in_use:
        raise _in_use_error(provider, in_use, DELETE_ALL_REFUSAL)
    lock_inventories_of(conn, [provider["id"]])
    bump_generation(conn, provider, generation)
    _delete_unused(conn, provider, list(current.items()), DELETE_ALL_REFUSAL)


def _delete_unused(
    conn: Connection, provider: Mapping[str, Any], rows: Sequence[tuple[str, Mapping[str, Any]]], refusal: str
) -> None:
    """Delete inventory rows that were read unused, refusing any that an allocation took since.

    Allocation writes do not lock the provider row before they raise ``used``, so on PostgreSQL a
    concurrent claim may have committed between the read and this delete; the ``used = 0`` condition
    is re-checked on the row's newest version, and a miss is the same in-use refusal.
    """
    for rc_name, row in rows:
        if execute(conn, _DELETE_UNUSED, (row["id"],)) != 1:
            raise _in_use_error(provider, [rc_name], refusal)
