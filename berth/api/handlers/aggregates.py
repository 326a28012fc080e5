"""/resource_providers/{uuid}/aggregates."""

from __future__ import annotations

from berth.api import schemas
from berth.api.responses import json_response
from berth.api.validation import normalize_uuid
from berth.domain.errors import BerthError
from berth.store import aggregates, providers


def _view(call, generation, uuids):
    body = {"aggregates": uuids}
    if call.version.at_least(19):
        body["resource_provider_generation"] = generation
    return body


def list_aggregates(call, uuid):
    def work(conn):
        provider = providers.require_provider(conn, uuid)
        return provider, aggregates.provider_aggregates(conn, provider["id"])

    provider, uuids = call.db.read(work)
    return json_response(call, _view(call, provider["generation"], uuids), last_modified=provider["updated_at"])


def update_aggregates(call, uuid):
    try:
        body = call.json_body(schemas.aggregates_put_schema(call.version))
    except BerthError:
        # An unknown provider is a 404 whatever the body says, as in the reference.
        call.db.read(lambda conn: providers.require_provider(conn, uuid))
        raise
    if call.version.at_least(19):
        wanted, expected = body["aggregates"], body["resource_provider_generation"]
    else:
        wanted, expected = body, None
    wanted = list(dict.fromkeys(normalize_uuid(u) for u in wanted))
    generation = call.db.write_statement(
        lambda conn: aggregates.replace_provider_aggregates(conn, uuid, wanted, expected)
    )
    return json_response(call, _view(call, generation, wanted))
