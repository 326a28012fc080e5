"""/resource_providers and /resource_providers/{uuid}."""

from __future__ import annotations

import uuid as uuidlib

from berth.api import schemas
from berth.api.query import parse_member_of, parse_required, parse_resources
from berth.api.responses import empty_response, json_response, location
from berth.api.validation import normalize_uuid, query_schema_check
from berth.domain.errors import BadRequest
from berth.store import names, providers
from berth.store.util import latest


def provider_links(call, uuid):
    base = f"/resource_providers/{uuid}"
    links = [
        {"rel": "self", "href": base},
        {"rel": "inventories", "href": f"{base}/inventories"},
        {"rel": "usages", "href": f"{base}/usages"},
    ]
    if call.version.at_least(1):
        links.append({"rel": "aggregates", "href": f"{base}/aggregates"})
    if call.version.at_least(6):
        links.append({"rel": "traits", "href": f"{base}/traits"})
    if call.version.at_least(11):
        links.append({"rel": "allocations", "href": f"{base}/allocations"})
    return links


def provider_view(call, row):
    view = {
        "uuid": row["uuid"],
        "name": row["name"],
        "generation": row["generation"],
        "links": provider_links(call, row["uuid"]),
    }
    if call.version.at_least(14):
        view["parent_provider_uuid"] = row["parent_provider_uuid"]
        view["root_provider_uuid"] = row["root_provider_uuid"]
    return view


def list_providers(call):
    query_schema_check(call.args, schemas.provider_list_query_schema(call.version))
    flt = provider_filter_from_query(call)

    def work(conn):
        if flt is None:
            return []
        return providers.list_providers(conn, resolve_provider_filter(conn, call, flt))

    rows = call.db.read(work)
    return json_response(
        call,
        {"resource_providers": [provider_view(call, r) for r in rows]},
        last_modified=latest(*(r["updated_at"] for r in rows)),
    )


def provider_filter_from_query(call):
    """The query's conditions, with names still unresolved (see ``resolve_provider_filter``)."""
    args = call.args
    version = call.version
    flt = {"filter": providers.ProviderFilter()}
    if "uuid" in args:
        flt["filter"].uuid = normalize_uuid(args["uuid"])
    if "name" in args:
        flt["filter"].name = args["name"]
    if "in_tree" in args:
        flt["filter"].in_tree = normalize_uuid(args["in_tree"])
    member_of = args.getlist("member_of")
    if member_of:
        if len(member_of) > 1 and not version.at_least(24):
            raise BadRequest("Multiple member_of parameters are not supported")
        aggregates = parse_member_of(member_of, allow_forbidden=version.at_least(32))
        flt["filter"].member_of = aggregates.groups
        flt["filter"].forbidden_aggregates = aggregates.forbidden
    if "resources" in args:
        flt["resources"] = parse_resources(args["resources"])
    required = args.getlist("required")
    if required:
        if not version.at_least(39):
            required = required[-1:]
        flt["traits"] = parse_required(
            required, allow_forbidden=version.at_least(22), allow_any_of=version.at_least(39)
        )
    return flt


def resolve_provider_filter(conn, call, flt) -> providers.ProviderFilter:
    result = flt["filter"]
    if "resources" in flt:
        ids = names.resource_class_ids(conn, flt["resources"])
        for name in flt["resources"]:
            if name not in ids:
                raise BadRequest(f"Invalid resource class in resources parameter: No such resource class {name}.")
        result.resources = {ids[n]: amount for n, amount in flt["resources"].items()}
    if "traits" in flt:
        trait_filter = flt["traits"]
        ids = names.require_trait_ids(conn, trait_filter.names())
        result.required_traits = [[ids[n] for n in group] for group in trait_filter.groups]
        result.forbidden_traits = [ids[n] for n in trait_filter.forbidden]
    return result


def create_provider(call):
    body = call.json_body(schemas.provider_body_schema(call.version, create=True))
    uuid = normalize_uuid(body["uuid"]) if body.get("uuid") else str(uuidlib.uuid4())
    parent = body.get("parent_provider_uuid")
    parent = normalize_uuid(parent) if parent else None
    row = call.db.write_statement(
        lambda conn: providers.create_provider(conn, uuid=uuid, name=body["name"], parent_uuid=parent)
    )
    headers = {"Location": location(call, f"/resource_providers/{uuid}")}
    if call.version.at_least(20):
        return json_response(call, provider_view(call, row), headers=headers)
    return empty_response(201, headers)


def show_provider(call, uuid):
    row = call.db.read(lambda conn: providers.require_provider(conn, uuid))
    return json_response(call, provider_view(call, row), last_modified=row["updated_at"])


def update_provider(call, uuid):
    body = call.json_body(schemas.provider_body_schema(call.version, create=False))
    parent = body.get("parent_provider_uuid")

    def work(conn):
        row = providers.require_provider(conn, uuid)
        return providers.update_provider(
            conn,
            row,
            name=body["name"],
            parent_uuid=normalize_uuid(parent) if parent else None,
            parent_given="parent_provider_uuid" in body,
            allow_reparent=call.version.at_least(37),
        )

    row = call.db.write(work)
    return json_response(call, provider_view(call, row))


def delete_provider(call, uuid):
    def work(conn):
        row = providers.require_provider(conn, uuid, f"No resource provider with uuid {uuid} found for delete")
        providers.delete_provider(conn, row)

    call.db.write(work)
    return empty_response()
