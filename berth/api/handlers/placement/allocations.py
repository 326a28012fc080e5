"""/allocations, /allocations/{consumer_uuid} and /resource_providers/{uuid}/allocations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, RowMapping

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.responses import json_response
from berth.api.schemas.placement.allocations import allocations_post_schema, allocations_put_schema
from berth.api.validation import is_uuid, normalize_uuid
from berth.domain.errors import BadRequest, NotFound
from berth.store.placement import allocations, consumers, providers
from berth.store.placement.allocations import UNSET, ConsumerAllocations
from berth.store.quotas.enforcement import allocation_write_changes, check_written
from berth.store.util import latest
from berth.web.responses import Reply, empty_response

# Consumers written before microversion 1.8 carry no owner; the reference records this one.
INCOMPLETE_CONSUMER_ID = "00000000-0000-0000-0000-000000000000"


def show_consumer_allocations(call: Call, consumer_uuid: str) -> Reply:
    def work(conn: Connection) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        return (allocations.allocations_of_consumer(conn, consumer_uuid), consumers.get_consumer(conn, consumer_uuid))

    rows, consumer = call.db.read(work)
    by_provider: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = by_provider.setdefault(
            row["provider_uuid"], {"generation": row["provider_generation"], "resources": {}}
        )
        entry["resources"][row["resource_class"]] = row["used"]
    body: dict[str, Any] = {"allocations": by_provider}
    if by_provider and consumer is not None and call.version >= mv.ALLOCATIONS_BY_PROVIDER:
        body["project_id"] = consumer["project_id"]
        body["user_id"] = consumer["user_id"]
        if call.version >= mv.CONSUMER_GENERATION:
            body["consumer_generation"] = consumer["generation"]
        if call.version >= mv.CONSUMER_TYPES:
            body["consumer_type"] = consumer["consumer_type"] or "unknown"
    return json_response(call, body, last_modified=latest(*(r["updated_at"] for r in rows)))


def request_from_body(call: Call, consumer_uuid: str, body: dict[str, Any]) -> ConsumerAllocations:
    """One consumer's allocations of a (schema-valid) request body, in either format."""
    wanted: dict[str, dict[str, int]]
    if isinstance(body["allocations"], list):
        wanted = {}
        for item in body["allocations"]:
            provider = normalize_uuid(item["resource_provider"]["uuid"])
            wanted.setdefault(provider, {}).update(item["resources"])
    else:
        wanted = {normalize_uuid(rp): dict(entry["resources"]) for rp, entry in body["allocations"].items()}
    return ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        allocations=wanted,
        project_id=body.get("project_id", INCOMPLETE_CONSUMER_ID),
        user_id=body.get("user_id", INCOMPLETE_CONSUMER_ID),
        consumer_generation=body["consumer_generation"] if call.version >= mv.CONSUMER_GENERATION else UNSET,
        consumer_type=body.get("consumer_type"),
    )


def _consumer_path_uuid(value: str) -> str:
    if not is_uuid(value):
        raise BadRequest(f"Malformed consumer_uuid: {value}")
    return normalize_uuid(value)


def put_consumer_allocations(call: Call, consumer_uuid: str) -> Reply:
    consumer_uuid = _consumer_path_uuid(consumer_uuid)
    body = call.json_body(allocations_put_schema(call.version))
    request = request_from_body(call, consumer_uuid, body)
    call.db.write(lambda conn: _write(call, conn, [request]))
    return empty_response()


def post_allocations(call: Call) -> Reply:
    body = call.json_body(allocations_post_schema(call.version))
    requests = [request_from_body(call, normalize_uuid(consumer), data) for consumer, data in body.items()]
    call.db.write(lambda conn: _write(call, conn, requests))
    return empty_response()


def _write(call: Call, conn: Connection, requests: list[ConsumerAllocations]) -> None:
    """Replace the consumers' allocations, within the quotas of their projects when the operator
    enforces them on these writes too (``enforce_quotas_on_allocations``; off, as Placement has none)."""
    if not call.settings.enforce_quotas_on_allocations:
        allocations.replace_allocations(conn, requests)
        return
    changes = allocation_write_changes(conn, requests)
    allocations.replace_allocations(conn, requests)
    check_written(conn, changes)


def delete_consumer_allocations(call: Call, consumer_uuid: str) -> Reply:
    if not call.db.write(lambda conn: allocations.delete_consumer_allocations(conn, consumer_uuid)):
        raise NotFound(f"No allocations for consumer '{consumer_uuid}'")
    return empty_response()


def list_provider_allocations(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], Sequence[RowMapping]]:
        # Placement words this 404 as its handler's message around the lookup's own.
        missing = f"Resource provider '{uuid}' not found: No resource provider with uuid {uuid} found"
        provider = providers.require_provider(conn, uuid, missing)
        return provider, allocations.allocations_on_provider(conn, provider["id"])

    provider, rows = call.db.read(work)
    with_generation = call.version >= mv.CONSUMER_GENERATION
    by_consumer: dict[str, dict[str, Any]] = {}
    for row in rows:
        consumer = by_consumer.get(row["consumer_id"])
        if consumer is None:
            consumer = by_consumer[row["consumer_id"]] = {"resources": {}}
            if with_generation:
                consumer["consumer_generation"] = row["consumer_generation"]
        consumer["resources"][row["resource_class"]] = row["used"]
    return json_response(
        call,
        {"resource_provider_generation": provider["generation"], "allocations": by_consumer},
        last_modified=latest(*(r["updated_at"] for r in rows)),
    )
