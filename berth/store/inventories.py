"""Inventories of a provider: what it has of each resource class, and how it may be allocated."""
from __future__ import annotations

import logging

import sqlalchemy as sa

from berth.domain.capacity import INVENTORY_FIELDS, Inventory
from berth.domain.errors import BadRequest, Conflict, InventoryInUse, NotFound
from berth.store import names
from berth.store.providers import bump_generation
from berth.store.schema import inventories, resource_classes
from berth.store.util import utcnow

LOG = logging.getLogger(__name__)


_OF_PROVIDER = (
    sa.select(inventories, resource_classes.c.name.label("resource_class"))
    .join(resource_classes, resource_classes.c.id == inventories.c.resource_class_id)
    .where(inventories.c.resource_provider_id == sa.bindparam("b_provider"))
    .order_by(resource_classes.c.id)
)
_INSERT = inventories.insert()


def inventory_of(row) -> Inventory:
    return Inventory(**{f: row[f] for f in INVENTORY_FIELDS})


def list_inventories(conn, provider_id):
    """Inventory rows of a provider keyed by resource class name, in class order."""
    rows = conn.execute(_OF_PROVIDER, {"b_provider": provider_id}).mappings().all()
    return {row["resource_class"]: row for row in rows}


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


def replace_inventories(conn, provider, generation, new: dict[str, Inventory], *, reserved_can_be_total):
    """Make the provider's inventories exactly ``new`` (PUT .../inventories)."""
    ids = _class_ids(conn, provider, new)
    for rc_name, inventory in new.items():
        _validate(provider, rc_name, inventory, reserved_can_be_total)
    new_generation = bump_generation(conn, provider, generation)
    current = list_inventories(conn, provider["id"])
    in_use = [rc for rc, row in current.items() if rc not in new and row["used"]]
    if in_use:
        raise _in_use_error(provider, in_use)
    for rc_name, row in current.items():
        if rc_name not in new:
            _delete_unused(conn, provider, [(rc_name, row)])
    now = utcnow()
    added = []
    for rc_name, inventory in new.items():
        row = current.get(rc_name)
        values = {f: getattr(inventory, f) for f in INVENTORY_FIELDS}
        if row is None:
            added.append(dict(resource_provider_id=provider["id"], resource_class_id=ids[rc_name], used=0,
                              created_at=now, updated_at=now, **values))
        else:
            _warn_if_over_used(provider, rc_name, inventory, row["used"])
            if any(row[f] != values[f] for f in INVENTORY_FIELDS):
                conn.execute(inventories.update().where(inventories.c.id == row["id"])
                             .values(updated_at=now, **values))
    if added:
        conn.execute(_INSERT, added)
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
    now = utcnow()
    conn.execute(inventories.insert().values(
        resource_provider_id=provider["id"], resource_class_id=ids[rc_name], used=0,
        created_at=now, updated_at=now, **{f: getattr(inventory, f) for f in INVENTORY_FIELDS}))
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
    conn.execute(inventories.update().where(inventories.c.id == row["id"])
                 .values(updated_at=utcnow(), **{f: getattr(inventory, f) for f in INVENTORY_FIELDS}))
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
        result = conn.execute(inventories.delete().where(inventories.c.id == row["id"], inventories.c.used == 0))
        if result.rowcount != 1:
            raise _in_use_error(provider, [rc_name])
