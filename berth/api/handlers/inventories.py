"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.responses import Reply, empty_response, json_response, location
from berth.api.schemas.inventories import INVENTORIES_PUT, INVENTORY_POST, INVENTORY_PUT_ONE
from berth.domain.capacity import INVENTORY_DEFAULTS, INVENTORY_FIELDS, Inventory
from berth.domain.errors import NotFound
from berth.store import inventories, providers
from berth.store.util import latest


def inventory_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {f: row[f] for f in INVENTORY_FIELDS}


def _fields(inventory: Inventory) -> dict[str, Any]:
    return {f: getattr(inventory, f) for f in INVENTORY_FIELDS}


def inventory_from_body(data: Mapping[str, Any]) -> Inventory:
    """The inventory of a (schema-valid) record, with the defaults for the fields it leaves out."""
    values = {**INVENTORY_DEFAULTS, **{k: v for k, v in data.items() if k in INVENTORY_FIELDS}}
    values["allocation_ratio"] = float(values["allocation_ratio"])
    return Inventory(**values)


def list_inventories(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
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


def show_inventory(call: Call, uuid: str, resource_class: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], dict[str, Any] | None]:
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


def _reserved_can_be_total(call: Call) -> bool:
    return call.version >= mv.RESERVED_EQUALS_TOTAL


def replace_inventories(call: Call, uuid: str) -> Reply:
    body = call.json_body(INVENTORIES_PUT)
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


def create_inventory(call: Call, uuid: str) -> Reply:
    body = call.json_body(INVENTORY_POST)
    rc_name = body["resource_class"]
    inventory = inventory_from_body(body)

    def work(conn: Connection) -> int:
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


def update_inventory(call: Call, uuid: str, resource_class: str) -> Reply:
    body = call.json_body(INVENTORY_PUT_ONE)
    inventory = inventory_from_body(body)

    def work(conn: Connection) -> int:
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


def delete_inventory(call: Call, uuid: str, resource_class: str) -> Reply:
    def work(conn: Connection) -> None:
        provider = providers.require_provider(conn, uuid)
        inventories.delete_inventory(conn, provider, resource_class)

    call.db.write(work)
    return empty_response()


def delete_inventories(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> None:
        provider = providers.require_provider(conn, uuid)
        inventories.delete_all_inventories(conn, provider)

    call.db.write(work)
    return empty_response()
