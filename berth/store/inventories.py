"""Inventories of a provider: what it has of each resource class, and how it may be allocated."""
from __future__ import annotations

import logging

from berth.domain.capacity import INVENTORY_FIELDS, Inventory
from berth.domain.errors import BadRequest, Conflict, InventoryInUse, NotFound
from berth.store import names
from berth.store.providers import bump_generation
from berth.store.rawsql import db_time, execute, execute_many, fetch_records
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


def inventory_of(row) -> Inventory:
    return Inventory(**{f: row[f] for f in INVENTORY_FIELDS})


def list_inventories(conn, provider_id):
    """Inventory rows of a provider keyed by resource class name, in class order."""
    return {row["resource_class"]: row for row in fetch_records(conn, _OF_PROVIDER, (provider_id,))}


def _class_ids(conn, provider, class_names, creating=False):
    ids = names.resource_class_ids(conn, class_names)
    unknown = sorted(set(class_names) - set(ids))
    if unknown:
        if creating:
            raise BadRequest(f"Unable to create inventory for resource provider {provider['uuid']}: "
                             f"No such resource class {unknown[0]}.")
        raise BadRequest(
            f"Unknown resource class in inventory for resource provider {provider['uuid']}: {unknown[0]}"
        )
    return ids


def _validate(provider, rc_name, inventory: Inventory, reserved_can_be_total, action="update"):
    reason = inventory.invalid_reason(reserved_can_be_total)
    if reason:
        raise BadRequest(
            f"Unable to {action} inventory for resource provider {provider['uuid']}: "
            f"Invalid inventory for '{rc_name}' on resource provider '{provider['uuid']}'. {reason}"
        )


def _warn_if_over_used(provider, rc_name, inventory: Inventory, used: int):
    # Allowed, as in the reference: a host whose disk shrank or whose reservation grew must still
    # be able to report it.  New allocations are refused until usage is back under capacity.
    if used > inventory.capacity:
        LOG.warning("resource provider %s is now over capacity for %s: %d used of %d",
                    provider["uuid"], rc_name, used, inventory.capacity)


def _in_use_error(provider, rc_names):
    return InventoryInUse(
        f"Inventory for '{', '.join(rc_names)}' on resource provider '{provider['uuid']}' in use."
    )


def replace_inventories(conn, provider, generation, new: dict[str, Inventory], *, reserved_can_be_total,
                        already_bumped=False):
    """Make the provider's inventories exactly ``new`` (PUT .../inventories).  ``already_bumped``:
    the caller has moved the generation from ``generation`` on already."""
    ids = _class_ids(conn, provider, new)
    for rc_name, inventory in new.items():
        _validate(provider, rc_name, inventory, reserved_can_be_total)
    new_generation = generation + 1 if already_bumped else bump_generation(conn, provider, generation)
    current = list_inventories(conn, provider["id"])
    in_use = [rc for rc, row in current.items() if rc not in new and row["used"]]
    if in_use:
        raise _in_use_error(provider, in_use)
    for rc_name, row in current.items():
        if rc_name not in new:
            _delete_unused(conn, provider, [(rc_name, row)])
    now = db_time(conn, utcnow())
    added = []
    for rc_name, inventory in new.items():
        row = current.get(rc_name)
        values = tuple(getattr(inventory, f) for f in INVENTORY_FIELDS)
        if row is None:
            added.append((provider["id"], ids[rc_name], *values, now, now))
        else:
            _warn_if_over_used(provider, rc_name, inventory, row["used"])
            if any(row[f] != v for f, v in zip(INVENTORY_FIELDS, values)):
                execute(conn, _UPDATE, (*values, now, row["id"]))
    execute_many(conn, _INSERT, added)
    return new_generation


def add_inventory(conn, provider, generation, rc_name, inventory: Inventory, *, reserved_can_be_total):
    ids = _class_ids(conn, provider, [rc_name], creating=True)
    _validate(provider, rc_name, inventory, reserved_can_be_total, action="create")
    new_generation = bump_generation(conn, provider, generation)
    if rc_name in list_inventories(conn, provider["id"]):
        raise Conflict(
            f"Update conflict: Inventory for '{rc_name}' on resource provider "
            f"'{provider['uuid']}' already exists."
        )
    now = db_time(conn, utcnow())
    execute(conn, _INSERT, (provider["id"], ids[rc_name], *(getattr(inventory, f) for f in INVENTORY_FIELDS),
                            now, now))
    return new_generation


def update_inventory(conn, provider, generation, rc_name, inventory: Inventory, *, reserved_can_be_total):
    _class_ids(conn, provider, [rc_name])
    _validate(provider, rc_name, inventory, reserved_can_be_total)
    new_generation = bump_generation(conn, provider, generation)
    row = list_inventories(conn, provider["id"]).get(rc_name)
    if row is None:
        raise BadRequest(
            f"No inventory record with resource class for resource provider {provider['uuid']}"
        )
    _warn_if_over_used(provider, rc_name, inventory, row["used"])
    execute(conn, _UPDATE, (*(getattr(inventory, f) for f in INVENTORY_FIELDS), db_time(conn, utcnow()),
                            row["id"]))
    return new_generation


def delete_inventory(conn, provider, rc_name):
    row = list_inventories(conn, provider["id"]).get(rc_name)
    if row is None:
        raise NotFound(f"No inventory of class {rc_name} found for delete")
    if row["used"]:
        raise _in_use_error(provider, [rc_name])
    bump_generation(conn, provider)
    _delete_unused(conn, provider, [(rc_name, row)])


def delete_all_inventories(conn, provider, generation=None):
    current = list_inventories(conn, provider["id"])
    in_use = [rc for rc, row in current.items() if row["used"]]
    if in_use:
        raise _in_use_error(provider, in_use)
    bump_generation(conn, provider, generation)
    _delete_unused(conn, provider, list(current.items()))


def _delete_unused(conn, provider, rows):
    """Delete inventory rows that were read unused, refusing any that an allocation took since.

    Allocation writes do not lock the provider row before they raise ``used``, so on PostgreSQL a
    concurrent claim may have committed between the read and this delete; the ``used = 0`` condition
    is re-checked on the row's newest version, and a miss is the same in-use refusal.
    """
    for rc_name, row in rows:
        if execute(conn, _DELETE_UNUSED, (row["id"],)) != 1:
            raise _in_use_error(provider, [rc_name])
