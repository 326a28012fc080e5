"""/traits, /traits/{name} and /resource_providers/{uuid}/traits."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Connection

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.handlers.placement.provider_lookup import repeated_not_found
from berth.api.responses import json_response, location
from berth.api.schemas.common import CUSTOM_NAME_PATTERN
from berth.api.schemas.placement.traits import PROVIDER_TRAITS_PUT, TRAITS_LIST_QUERY
from berth.api.validation import query_schema_check
from berth.domain.errors import BadRequest, NotFound
from berth.store.placement import names, provider_traits, providers
from berth.store.placement.names import TraitFilters
from berth.store.util import latest
from berth.web.responses import Reply, empty_response, http_date

_CUSTOM = re.compile(CUSTOM_NAME_PATTERN)


def list_traits(call: Call) -> Reply:
    query_schema_check(call.args, TRAITS_LIST_QUERY)
    filters: TraitFilters = {}
    if "name" in call.args:
        value = call.args["name"]
        if value.startswith("in:"):
            filters["names"] = value[3:].split(",")
        elif value.startswith("startswith:"):
            filters["prefix"] = value[len("startswith:") :]
        elif ":" in value:
            pass  # an unknown operator filters nothing, as in the reference
        else:
            raise BadRequest(
                "Badly formatted name parameter. Expected name query string parameter in form: "
                f'?name=[in|startswith]:[name1,name2|prefix]. Got: "{value}"'
            )
    if "associated" in call.args:
        value = call.args["associated"].lower()
        if value not in ("true", "false"):
            raise BadRequest('The query parameter "associated" only accepts "true" or "false"')
        filters["associated"] = value == "true"
    rows = call.db.read(lambda conn: names.list_traits(conn, **filters))
    return json_response(
        call, {"traits": [r["name"] for r in rows]}, last_modified=latest(*(r["updated_at"] for r in rows))
    )


def show_trait(call: Call, name: str) -> Reply:
    row = call.db.read(lambda conn: names.get_trait(conn, name))
    if row is None:
        raise NotFound(f"No such trait(s): {name}.")
    response = empty_response(204)
    if call.version >= mv.CACHE_HEADERS:
        response.headers["cache-control"] = "no-cache"
        response.headers["last-modified"] = http_date(row["updated_at"])
    return response


def put_trait(call: Call, name: str) -> Reply:
    if not _CUSTOM.match(name) or len(name) > 255:
        raise BadRequest(
            "The trait is invalid. A valid trait must be no longer than 255 characters, start with the "
            'prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"'
        )
    created = call.db.write(lambda conn: names.ensure_trait(conn, name))
    headers = {"Location": location(call, f"/traits/{name}")}
    if call.version >= mv.CACHE_HEADERS:
        headers.update({"cache-control": "no-cache", "last-modified": http_date()})
    return empty_response(201 if created else 204, headers)


def delete_trait(call: Call, name: str) -> Reply:
    call.db.write(lambda conn: names.delete_trait(conn, name))
    return empty_response()


def list_provider_traits(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> tuple[dict[str, Any], list[str]]:
        provider = providers.require_provider(conn, uuid, repeated_not_found(uuid, ": "))
        return provider, provider_traits.provider_traits(conn, provider["id"])

    provider, traits = call.db.read(work)
    return json_response(
        call,
        {"traits": traits, "resource_provider_generation": provider["generation"]},
        last_modified=provider["updated_at"],
    )


def update_provider_traits(call: Call, uuid: str) -> Reply:
    body = call.json_body(PROVIDER_TRAITS_PUT)

    try:
        generation = call.db.write_statement(
            lambda conn: provider_traits.replace_provider_traits(
                conn, uuid, body["resource_provider_generation"], body["traits"]
            )
        )
    except names.UnknownTraits as unknown:
        raise BadRequest(f"No such trait {', '.join(unknown.missing)}") from None
    # The provider's traits are now exactly those of the body, listed by name as when read back.
    return json_response(call, {"traits": sorted(set(body["traits"])), "resource_provider_generation": generation})


def delete_provider_traits(call: Call, uuid: str) -> Reply:
    def work(conn: Connection) -> None:
        provider = providers.require_provider(conn, uuid)
        providers.bump_generation(conn, provider)
        provider_traits.set_provider_traits(conn, provider["id"], {})

    call.db.write(work)
    return empty_response()
