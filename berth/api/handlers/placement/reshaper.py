"""POST /reshaper: move inventories and the allocations against them within a tree, atomically."""

from __future__ import annotations

from typing import Any, TypeAlias

from sqlalchemy import Connection

from berth.api.call import Call
from berth.api.handlers.placement.allocations import request_from_body
from berth.api.handlers.placement.inventories import inventory_from_body
from berth.api.schemas.placement.reshaper import reshaper_schema
from berth.api.validation import normalize_uuid
from berth.domain import error_codes
from berth.domain.capacity import Inventory
from berth.domain.errors import BadRequest, ConcurrentUpdate
from berth.store.placement import allocations, inventories, names, providers
from berth.store.placement.allocations import ConsumerAllocations
from berth.web.responses import Reply, empty_response

# Provider uuid -> (the generation the client saw, its new inventories by class name).
NewInventories: TypeAlias = dict[str, tuple[int, dict[str, Inventory]]]


def reshape(call: Call) -> Reply:
    body = call.json_body(reshaper_schema(call.version))
    consumer_requests = [
        request_from_body(call, normalize_uuid(consumer), data) for consumer, data in body["allocations"].items()
    ]
    new_inventories: NewInventories = {
        uuid: (
            entry["resource_provider_generation"],
            {rc: inventory_from_body(data) for rc, data in entry["inventories"].items()},
        )
        for uuid, entry in body["inventories"].items()
    }

    def work(conn: Connection) -> None:
        # Refusals in the reference's order: a provider of the inventories unknown or at another
        # generation, a consumer at another generation, a provider of the allocations unknown, then
        # a resource class unknown (in the inventories, then in the allocations).
        found = _providers_at_generation(conn, new_inventories)
        allocations.check_consumer_generations(conn, consumer_requests)
        allocations.require_providers(conn, consumer_requests)
        _require_classes(conn, new_inventories, consumer_requests)
        # As the reference does it: first every provider holds the union of its old and new
        # inventories, then the allocations move, then each provider keeps only its new inventory.
        # Capacity is checked against the union, the in-use rule against the final inventories,
        # and each step that writes a provider's inventory bumps its generation.  A provider whose
        # new inventory is empty skips the union, which would be its old inventory again: its
        # generation moves once, when it is emptied at the end.
        for uuid, (generation, wanted) in sorted(new_inventories.items()):
            if not wanted:
                continue
            provider = found[uuid]
            current = inventories.list_inventories(conn, provider["id"])
            union = {rc: inventories.inventory_of(row) for rc, row in current.items()} | wanted
            inventories.replace_inventories(conn, provider, generation, union, reserved_can_be_total=True)
        # A provider that a consumer's allocations leave because they become {} counts as written
        # to by the allocations' step, as every provider receiving allocations does: the reference
        # bumps each once there.
        emptied_from = allocations.release_for_reshape(conn, consumer_requests)
        allocations.replace_allocations(conn, consumer_requests, emptied_from=emptied_from)
        for uuid, (_, wanted) in sorted(new_inventories.items()):
            provider = providers.require_provider(conn, uuid)
            inventories.replace_inventories(conn, provider, provider["generation"], wanted, reserved_can_be_total=True)

    call.db.write(work)
    return empty_response()


def _require_classes(
    conn: Connection, new_inventories: NewInventories, consumer_requests: list[ConsumerAllocations]
) -> None:
    named = [rc for _, wanted in new_inventories.values() for rc in wanted]
    named += [rc for request in consumer_requests for by_rc in request.allocations.values() for rc in by_rc]
    known = names.resource_class_ids(conn, set(named))
    for rc in named:
        if rc not in known:
            raise BadRequest(f"malformed reshaper data: No such resource class {rc}.")


def _providers_at_generation(conn: Connection, new_inventories: NewInventories) -> dict[str, dict[str, Any]]:
    """The providers whose inventories change, each still at the generation the client saw."""
    found: dict[str, dict[str, Any]] = {}
    for uuid, (generation, _) in sorted(new_inventories.items()):
        provider = providers.get_provider(conn, uuid)
        if provider is None:
            raise BadRequest(
                f"Resource provider {uuid} in inventories not found: No resource provider with uuid {uuid} found",
                code=error_codes.PROVIDER_NOT_FOUND,
            )
        if provider["generation"] != generation:
            raise ConcurrentUpdate(
                f"resource provider generation conflict for provider {uuid}: "
                f"actual: {provider['generation']}, given: {generation}"
            )
        found[uuid] = provider
    return found
