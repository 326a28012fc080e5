"""/resource_providers/{uuid}/usages and /usages."""

from __future__ import annotations

from berth.api import schemas
from berth.api.responses import json_response
from berth.api.validation import query_schema_check
from berth.store import consumers, providers, usages


def provider_usages(call, uuid):
    def work(conn):
        provider = providers.require_provider(conn, uuid)
        return provider, usages.provider_usages(conn, provider["id"])

    provider, used = call.db.read(work)
    return json_response(call, {"resource_provider_generation": provider["generation"], "usages": used})


def project_usages(call):
    call.authorize("placement:usages", {"project_id": call.args.get("project_id"), "user_id": call.args.get("user_id")})
    query_schema_check(call.args, schemas.usages_query_schema(call.version))
    project_id = call.args["project_id"]
    user_id = call.args.get("user_id")
    by_type = call.version.at_least(38)
    consumer_type = call.args.get("consumer_type") if by_type else None

    def work(conn):
        project_pk = consumers.lookup_project_pk(conn, project_id)
        user_pk = consumers.lookup_user_pk(conn, user_id) if user_id is not None else None
        if project_pk is None or (user_id is not None and user_pk is None):
            return {}
        return usages.project_usages(conn, project_pk, user_pk, by_consumer_type=by_type, consumer_type=consumer_type)

    return json_response(call, {"usages": call.db.read(work)})
