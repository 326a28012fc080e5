"""/resource_providers/{uuid}/aggregates."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.handlers.placement.provider_lookup import provider_json_body
from berth.api.responses import json_response
from berth.api.schemas.placement.aggregates import aggregates_put_schema
from berth.api.validation import normalize_uuid
from berth.store.placement import aggregates, providers
from berth.web.responses import Reply


def _view(call: Call, generation: int, uuids: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {"aggregates": uuids}
    if call.version >= mv.AGGREGATES_GENERATION:
        body["resource_provider_generation"] = generation
    return body


def list_aggregates(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], list[str]]:
        provider = providers.require_provider(conn, uuid)
        return provider, aggregates.provider_aggregates(conn, provider["id"])

    provider, uuids = call.db.read(work)
    return json_response(call, _view(call, provider["generation"], uuids), last_modified=provider["updated_at"])


def update_aggregates(call: Call, uuid: str) -> Reply:
    body = provider_json_body(call, uuid, aggregates_put_schema(call.version))
    expected: int | None
    if call.version >= mv.AGGREGATES_GENERATION:
        given, expected = body["aggregates"], body["resource_provider_generation"]
    else:
        given, expected = body, None
    wanted = list(dict.fromkeys(normalize_uuid(u) for u in given))
    generation = call.db.write_statement(
        lambda conn: aggregates.replace_provider_aggregates(conn, uuid, wanted, expected)
    )
    return json_response(call, _view(call, generation, wanted))
