"""/resource_providers and /resource_providers/{uuid}."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, RowMapping
from werkzeug.datastructures import MultiDict

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.candidates.query import parse_member_of, parse_required, parse_resources
from berth.api.handlers.placement.provider_lookup import provider_json_body
from berth.api.microversion import Version
from berth.api.responses import json_response, link, location
from berth.api.schemas.placement.resource_providers import provider_body_schema, provider_list_query_schema
from berth.api.validation import normalize_uuid, query_schema_check
from berth.domain.candidate_query import AggregateQuery, TraitQuery
from berth.domain.errors import BadRequest, DuplicateName, NotFound
from berth.store.placement import names, providers
from berth.store.util import latest
from berth.web.responses import Reply, empty_response


def provider_links(call: Call, uuid: str) -> list[dict[str, str]]:
    base = link(call, f"/resource_providers/{uuid}")
    links = [
        {"rel": "self", "href": base},
        {"rel": "inventories", "href": f"{base}/inventories"},
        {"rel": "usages", "href": f"{base}/usages"},
    ]
    if call.version >= mv.PROVIDER_AGGREGATES:
        links.append({"rel": "aggregates", "href": f"{base}/aggregates"})
    if call.version >= mv.TRAITS:
        links.append({"rel": "traits", "href": f"{base}/traits"})
    if call.version >= mv.ALLOCATIONS_LINK:
        links.append({"rel": "allocations", "href": f"{base}/allocations"})
    return links


def provider_view(call: Call, row: Mapping[str, Any] | RowMapping) -> dict[str, Any]:
    view = {
        "uuid": row["uuid"],
        "name": row["name"],
        "generation": row["generation"],
        "links": provider_links(call, row["uuid"]),
    }
    if call.version >= mv.NESTED_PROVIDERS:
        view["parent_provider_uuid"] = row["parent_provider_uuid"]
        view["root_provider_uuid"] = row["root_provider_uuid"]
    return view


def list_providers(call: Call) -> Reply:
    query_schema_check(call.args, provider_list_query_schema(call.version))
    query = provider_query(call.args, call.version)

    def work(conn: Connection) -> Sequence[RowMapping]:
        return providers.list_providers(conn, resolve_provider_query(conn, query))

    rows = call.db.read(work)
    return json_response(
        call,
        {"resource_providers": [provider_view(call, r) for r in rows]},
        last_modified=latest(*(r["updated_at"] for r in rows)),
    )


@dataclass(frozen=True)
class ProviderQuery:
    """The conditions of GET /resource_providers, names not yet resolved to ids."""

    uuid: str | None = None
    name: str | None = None
    in_tree: str | None = None
    aggregates: AggregateQuery = AggregateQuery()
    # Resource class name -> amount.
    resources: Mapping[str, int] | None = None
    traits: TraitQuery | None = None


def provider_query(args: MultiDict[str, str], version: Version) -> ProviderQuery:
    """The query's conditions, with names still unresolved (see ``resolve_provider_query``).  The
    values are read in the reference's order: member_of, required, then the others."""
    aggregates = AggregateQuery()
    member_of = args.getlist("member_of")
    if member_of:
        if len(member_of) > 1 and version < mv.MULTIPLE_MEMBER_OF:
            raise BadRequest("Multiple member_of parameters are not supported")
        aggregates = parse_member_of(member_of, allow_forbidden=version >= mv.FORBIDDEN_AGGREGATES)
    traits = None
    required = args.getlist("required")
    if required:
        if version < mv.ANY_OF_TRAITS:
            required = required[-1:]
        traits = parse_required(
            required, allow_forbidden=version >= mv.FORBIDDEN_TRAITS, allow_any_of=version >= mv.ANY_OF_TRAITS
        )
    return ProviderQuery(
        uuid=normalize_uuid(args["uuid"]) if "uuid" in args else None,
        # An empty name filters nothing, as in Placement (which tests the name for truth).
        name=args.get("name") or None,
        in_tree=normalize_uuid(args["in_tree"]) if "in_tree" in args else None,
        aggregates=aggregates,
        resources=parse_resources(args["resources"]) if "resources" in args else None,
        traits=traits,
    )


def resolve_provider_query(conn: Connection, query: ProviderQuery) -> providers.ProviderFilter:
    """The store's filter of the query, its names as ids: a 400 for an unknown class or trait."""
    result = providers.ProviderFilter(
        uuid=query.uuid,
        name=query.name,
        in_tree=query.in_tree,
        member_of=[list(any_of) for any_of in query.aggregates.member_of],
        forbidden_aggregates=list(query.aggregates.forbidden),
    )
    if query.resources is not None:
        ids = names.resource_class_ids(conn, query.resources)
        for name in query.resources:
            if name not in ids:
                raise BadRequest(f"Invalid resource class in resources parameter: No such resource class {name}.")
        result.resources = {ids[n]: amount for n, amount in query.resources.items()}
    if query.traits is not None:
        result.required_traits, result.forbidden_traits = _trait_filter(conn, query.traits)
    return result


def _trait_filter(conn: Connection, traits: TraitQuery) -> tuple[list[list[int]], list[int]]:
    """The ids of the traits required (each an any-of list) and forbidden."""
    try:
        trait_ids = names.require_trait_ids(conn, traits.names())
    except names.UnknownTraits as unknown:
        raise BadRequest(f'Invalid trait(s) in "required" parameter: {unknown.detail}') from None
    return [[trait_ids[n] for n in any_of] for any_of in traits.required], [trait_ids[n] for n in traits.forbidden]


def create_provider(call: Call) -> Reply:
    body = call.json_body(provider_body_schema(call.version, create=True))
    uuid = normalize_uuid(body["uuid"]) if body.get("uuid") else str(uuidlib.uuid4())
    if not body["name"]:
        # The schema lets an empty name through; Placement's provider refuses it before its parent.
        raise BadRequest(
            f'Unable to create resource provider "", {uuid}: Object action create failed because: name is required'
        )
    parent = body.get("parent_provider_uuid")
    parent = normalize_uuid(parent) if parent else None
    row = call.db.write_statement(
        lambda conn: providers.create_provider(conn, uuid=uuid, name=body["name"], parent_uuid=parent)
    )
    headers = {"Location": location(call, f"/resource_providers/{uuid}")}
    if call.version >= mv.CREATE_PROVIDER_BODY:
        return json_response(call, provider_view(call, row), headers=headers)
    return empty_response(201, headers)


def show_provider(call: Call, uuid: str) -> Reply:
    row = call.db.read(lambda conn: providers.require_provider(conn, uuid))
    return json_response(call, provider_view(call, row), last_modified=row["updated_at"])


def update_provider(call: Call, uuid: str) -> Reply:
    body = provider_json_body(call, uuid, provider_body_schema(call.version, create=False))
    parent = body.get("parent_provider_uuid")

    def work(conn: Connection) -> dict[str, Any]:
        row = providers.require_provider(conn, uuid)
        try:
            updated = providers.update_provider(
                conn,
                row,
                name=body["name"],
                parent_uuid=normalize_uuid(parent) if parent else None,
                parent_given="parent_provider_uuid" in body,
                allow_reparent=call.version >= mv.REPARENT,
            )
        except DuplicateName:
            # Worded as the reference words a rename's clash: by the name alone.
            raise DuplicateName(f"Conflicting resource provider {body['name']} already exists.") from None
        if updated is None:
            raise NotFound(f"No resource provider with uuid {uuid} found")
        return updated

    row = call.db.write(work)
    return json_response(call, provider_view(call, row))


def delete_provider(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> None:
        row = providers.require_provider(conn, uuid, f"No resource provider with uuid {uuid} found for delete")
        providers.delete_provider(conn, row)

    call.db.write(work)
    return empty_response()
