"""/resource_providers/{uuid}/aggregates."""
from __future__ import annotations

from berth.api import schemas
from berth.api.responses import json_response
from berth.api.validation import normalize_uuid
from berth.domain.errors import ConcurrentUpdate
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
    def work(conn):
        # The provider is looked up before the body is read: an unknown provider is a 404 whatever
        # the body says, as in the reference.
        provider = providers.require_provider(conn, uuid)
        body = call.json_body(schemas.aggregates_put_schema(call.version))
        if call.version.at_least(19):
            wanted, expected = body["aggregates"], body["resource_provider_generation"]
        else:
            wanted, expected = body, None
        wanted = [normalize_uuid(u) for u in wanted]
        if expected is not None and expected != provider["generation"]:
            raise ConcurrentUpdate(providers.GENERATION_CHANGED)
        generation = provider["generation"]
        if call.version.at_least(19):
            # Before 1.19 the reference leaves the generation alone when aggregates change.
            generation = providers.bump_generation(conn, provider, conflict_detail=providers.GENERATION_CHANGED)
        aggregates.set_provider_aggregates(conn, provider["id"], wanted)
        return generation, list(dict.fromkeys(wanted))

    generation, uuids = call.db.write(work)
    return json_response(call, _view(call, generation, uuids))
