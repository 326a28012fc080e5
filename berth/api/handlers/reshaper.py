"""POST /reshaper: move inventories and the allocations against them within a tree, atomically."""
from __future__ import annotations

from berth.api import schemas
from berth.api.handlers.allocations import request_from_body
from berth.api.handlers.inventories import inventory_from_body
from berth.api.responses import empty_response
from berth.api.validation import normalize_uuid
from berth.domain.errors import BadRequest
from berth.store import allocations, inventories, providers


def reshape(call):
    body = call.json_body(schemas.reshaper_schema(call.version))
    consumer_requests = [request_from_body(call, normalize_uuid(consumer), data) for consumer, data in body["allocations"].items()]
    new_inventories = {
        uuid: (entry["resource_provider_generation"],
               {rc: inventory_from_body(data) for rc, data in entry["inventories"].items()})
        for uuid, entry in body["inventories"].items()
    }

    def work(conn):
        allocations.release_for_reshape(conn, consumer_requests)
        for uuid, (generation, wanted) in sorted(new_inventories.items()):
            provider = providers.get_provider(conn, uuid)
            if provider is None:
                raise BadRequest(f"Resource provider {uuid} in inventories not found")
            inventories.replace_inventories(conn, provider, generation, wanted,
                                            reserved_can_be_total=True)
        allocations.replace_allocations(conn, consumer_requests)

    call.db.write(work)
    return empty_response()
