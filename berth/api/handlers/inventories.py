"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from berth.api import schemas
from berth.api.responses import empty_response, json_response, location
from berth.domain.capacity import INVENTORY_DEFAULTS, INVENTORY_FIELDS, Inventory
from berth.domain.errors import NotFound
from berth.store import inventories, providers
from berth.store.util import latest


def inventory_view(row) -> dict:
    return {f: row[f] for f in INVENTORY_FIELDS}


def _fields(inventory: Inventory) -> dict:
    return {f: getattr(inventory, f) for f in INVENTORY_FIELDS}


def inventory_from_body(data) -> Inventory:
    values = {**INVENTORY_DEFAULTS, **{k: v for k, v in data.items() if k in INVENTORY_FIELDS}}
    values["allocation_ratio"] = float(values["allocation_ratio"])
    return Inventory(**values)


def list_inventories(call, uuid):
    def work(conn):
        provider = providers.require_provider(conn, uuid)
        return provider, inventories.list_inventories(conn, provider["id"])

    provider, rows = call.db.read(work)
    return json_response(
        call,
        {
            "resource_provider_generation": provider["generation"],
            "inventories": {name: inventory_view(row) for name, row in rows.items()},
        },
        last_modified=latest(*(r["updated_at"] for r in rows.values())),
    )


def show_inventory(call, uuid, resource_class):
    def work(conn):
        provider = providers.require_provider(conn, uuid)
        return provider, inventories.list_inventories(conn, provider["id"]).get(resource_class)

    provider, row = call.db.read(work)
    if row is None:
        raise NotFound(f"No inventory of class {resource_class} for {uuid}")
    return json_response(
        call,
        {"resource_provider_generation": provider["generation"], **inventory_view(row)},
        last_modified=row["updated_at"],
    )


def _reserved_can_be_total(call):
    return call.version.at_least(26)


def replace_inventories(call, uuid):
    body = call.json_body(schemas.INVENTORIES_PUT)
    new = {name: inventory_from_body(data) for name, data in body["inventories"].items()}

    generation = call.db.write_statement(
        lambda conn: inventories.replace_inventories_of(
            conn, uuid, body["resource_provider_generation"], new, reserved_can_be_total=_reserved_can_be_total(call)
        )
    )
    # The provider's inventories are now exactly those of the body: no need to read them back.
    return json_response(
        call,
        {
            "resource_provider_generation": generation,
            "inventories": {name: _fields(inventory) for name, inventory in new.items()},
        },
    )


def create_inventory(call, uuid):
    body = call.json_body(schemas.INVENTORY_POST)
    rc_name = body["resource_class"]
    inventory = inventory_from_body(body)

    def work(conn):
        provider = providers.require_provider(conn, uuid)
        return inventories.add_inventory(
            conn,
            provider,
            body.get("resource_provider_generation", provider["generation"]),
            rc_name,
            inventory,
            reserved_can_be_total=_reserved_can_be_total(call),
        )

    generation = call.db.write(work)
    return json_response(
        call,
        {"resource_provider_generation": generation, **_fields(inventory)},
        status=201,
        headers={"Location": location(call, f"/resource_providers/{uuid}/inventories/{rc_name}")},
    )


def update_inventory(call, uuid, resource_class):
    body = call.json_body(schemas.INVENTORY_PUT_ONE)
    inventory = inventory_from_body(body)

    def work(conn):
        provider = providers.require_provider(conn, uuid)
        return inventories.update_inventory(
            conn,
            provider,
            body["resource_provider_generation"],
            resource_class,
            inventory,
            reserved_can_be_total=_reserved_can_be_total(call),
        )

    generation = call.db.write(work)
    return json_response(call, {"resource_provider_generation": generation, **_fields(inventory)})


def delete_inventory(call, uuid, resource_class):
    def work(conn):
        provider = providers.require_provider(conn, uuid)
        inventories.delete_inventory(conn, provider, resource_class)

    call.db.write(work)
    return empty_response()


def delete_inventories(call, uuid):
    def work(conn):
        provider = providers.require_provider(conn, uuid)
        inventories.delete_all_inventories(conn, provider)

    call.db.write(work)
    return empty_response()
