"""/resource_providers/{uuid}/usages and /usages."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.responses import json_response
from berth.api.schemas.placement.usages import usages_query_schema
from berth.api.validation import query_schema_check
from berth.store.placement import consumers, providers, usages
from berth.web.responses import Reply


def provider_usages(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], dict[str, int]]:
        # Placement words this 404 as its handler's message around the lookup's own, the same words twice.
        lookup = f"No resource provider with uuid {uuid} found"
        provider = providers.require_provider(conn, uuid, f"{lookup}: {lookup}")
        return provider, usages.provider_usages(conn, provider["id"])

    provider, used = call.db.read(work)
    return json_response(call, {"resource_provider_generation": provider["generation"], "usages": used})


def project_usages(call: Call) -> Reply:
    call.authorize("placement:usages", {"project_id": call.args.get("project_id"), "user_id": call.args.get("user_id")})
    query_schema_check(call.args, usages_query_schema(call.version))
    project_id = call.args["project_id"]
    user_id = call.args.get("user_id")
    by_type = call.version >= mv.CONSUMER_TYPES
    consumer_type = call.args.get("consumer_type") if by_type else None

    def work(conn: Connection) -> dict[str, Any]:
        project_pk = consumers.lookup_project_pk(conn, project_id)
        user_pk = consumers.lookup_user_pk(conn, user_id) if user_id is not None else None
        if project_pk is None or (user_id is not None and user_pk is None):
            return {}
        return usages.project_usages(conn, project_pk, user_pk, by_consumer_type=by_type, consumer_type=consumer_type)

    return json_response(call, {"usages": call.db.read(work)})
