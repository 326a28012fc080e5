"""/resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.handlers.placement.provider_lookup import provider_json_body, repeated_not_found
from berth.api.responses import json_response, location
from berth.api.schemas.placement.inventories import INVENTORIES_PUT, INVENTORY_POST, INVENTORY_PUT_ONE
from berth.domain.capacity import INVENTORY_DEFAULTS, INVENTORY_FIELDS, Inventory
from berth.domain.errors import ConcurrentUpdate, NotFound
from berth.store.placement import inventories, names, providers
from berth.store.util import latest
from berth.web.responses import Reply, empty_response


def inventory_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {f: row[f] for f in INVENTORY_FIELDS}


def _fields(inventory: Inventory) -> dict[str, Any]:
    return {f: getattr(inventory, f) for f in INVENTORY_FIELDS}


def inventory_from_body(data: Mapping[str, Any]) -> Inventory:
    """The inventory of a (schema-valid) record, with the defaults for the fields it leaves out."""
    values = {**INVENTORY_DEFAULTS, **{k: v for k, v in data.items() if k in INVENTORY_FIELDS}}
    values["allocation_ratio"] = float(values["allocation_ratio"])
    return Inventory(**values)


# How the reference words a provider's generation moving under a write, per operation: a generation
# the client gave that is no longer the provider's, and one that moved while the write ran.
_STALE_GENERATION = "resource provider generation conflict"
_RACED = "Another thread concurrently updated the resource provider data. Please retry your update"


@contextmanager
def _conflicts_worded(detail: str) -> Iterator[None]:
    """A generation conflict of the store, refused with ``detail``."""
    try:
        yield
    except ConcurrentUpdate:
        raise ConcurrentUpdate(detail) from None


def _class_exists(conn: Connection, rc_name: str) -> bool:
    return rc_name in names.resource_class_ids(conn, [rc_name])


def list_inventories(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        provider = providers.require_provider(conn, uuid, repeated_not_found(uuid, " : "))
        return provider, inventories.list_inventories(conn, provider["id"])

    provider, rows = call.db.read(work)
    return _without_moment_if_empty(
        json_response(
            call,
            {
                "resource_provider_generation": provider["generation"],
                "inventories": {name: inventory_view(row) for name, row in rows.items()},
            },
            last_modified=latest(*(r["updated_at"] for r in rows.values())),
        ),
        rows,
    )


def _without_moment_if_empty(response: Reply, inventories: Mapping[str, Any]) -> Reply:
    """No Last-Modified for a provider's inventories when it has none, as Placement, which takes the
    moment from the inventories themselves (cache-control stays)."""
    if not inventories:
        response.headers.pop("last-modified", None)
    return response


def show_inventory(call: Call, uuid: str, resource_class: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], dict[str, Any] | None]:
        provider = providers.require_provider(conn, uuid, repeated_not_found(uuid, " : "))
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
    body = provider_json_body(call, uuid, INVENTORIES_PUT)
    new = {name: inventory_from_body(data) for name, data in body["inventories"].items()}

    # One statement on PostgreSQL, which cannot tell a stale generation from one that moved meanwhile.
    with _conflicts_worded(_STALE_GENERATION):
        generation = call.db.write_statement(
            lambda conn: inventories.replace_inventories_of(
                conn,
                uuid,
                body["resource_provider_generation"],
                new,
                reserved_can_be_total=_reserved_can_be_total(call),
            )
        )
    # The provider's inventories are now exactly those of the body: no need to read them back.
    return _without_moment_if_empty(
        json_response(
            call,
            {
                "resource_provider_generation": generation,
                "inventories": {name: _fields(inventory) for name, inventory in new.items()},
            },
        ),
        new,
    )


def create_inventory(call: Call, uuid: str) -> Reply:
    body = provider_json_body(call, uuid, INVENTORY_POST)
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

    # The reference ignores a generation given here and only refuses a race, worded so; Berth also
    # refuses a stale generation (docs/compatibility.md).
    with _conflicts_worded(f"Update conflict: {_RACED}"):
        generation = call.db.write(work)
    return json_response(
        call,
        {"resource_provider_generation": generation, **_fields(inventory)},
        status=201,
        headers={"Location": location(call, f"/resource_providers/{uuid}/inventories/{rc_name}")},
    )


def update_inventory(call: Call, uuid: str, resource_class: str) -> Reply:
    body = provider_json_body(call, uuid, INVENTORY_PUT_ONE)
    inventory = inventory_from_body(body)
    reserved_can_be_total = _reserved_can_be_total(call)

    def work(conn: Connection) -> int:
        provider = providers.require_provider(conn, uuid)
        if body["resource_provider_generation"] != provider["generation"]:
            raise ConcurrentUpdate(_STALE_GENERATION)
        # The reference looks the class up last, after the inventory's own checks, and a class it
        # does not know is a 404 (the store's refusal of one is the 400 of PUT .../inventories).
        if inventory.invalid_reason(reserved_can_be_total) is None and not _class_exists(conn, resource_class):
            raise NotFound(f"No such resource class {resource_class}.")
        with _conflicts_worded(f"update conflict: {_RACED}"):
            return inventories.update_inventory(
                conn,
                provider,
                body["resource_provider_generation"],
                resource_class,
                inventory,
                reserved_can_be_total=reserved_can_be_total,
            )

    generation = call.db.write(work)
    return json_response(call, {"resource_provider_generation": generation, **_fields(inventory)})


def delete_inventory(call: Call, uuid: str, resource_class: str) -> Reply:
    refusal = f"No inventory of class {resource_class} found for delete"

    def work(conn: Connection) -> None:
        provider = providers.require_provider(conn, uuid)
        if not _class_exists(conn, resource_class):
            raise NotFound(f"{refusal}: No such resource class {resource_class}.")
        try:
            with _conflicts_worded(f"Unable to delete inventory of class {resource_class}: {_RACED}"):
                inventories.delete_inventory(conn, provider, resource_class)
        except NotFound as missing:
            raise NotFound(f"{refusal}: {missing.detail}") from None

    call.db.write(work)
    return empty_response()


def delete_inventories(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> None:
        provider = providers.require_provider(conn, uuid)
        with _conflicts_worded(
            f"Unable to delete inventory for resource provider {uuid} because the inventory was "
            "updated by another process. Please retry your request."
        ):
            inventories.delete_all_inventories(conn, provider)

    call.db.write(work)
    return empty_response()
