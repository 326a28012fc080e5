"""/resource_classes and /resource_classes/{name}."""

from __future__ import annotations

from typing import Any

from berth.api import microversion as mv
from berth.api.call import Call
from berth.api.responses import json_response, link, location
from berth.api.schemas.placement.resource_classes import RESOURCE_CLASS_BODY
from berth.api.validation import validate
from berth.domain.errors import DuplicateName, NotFound
from berth.store.placement import names
from berth.store.util import latest
from berth.web.responses import Reply, empty_response


def _view(call: Call, name: str) -> dict[str, Any]:
    return {"name": name, "links": [{"rel": "self", "href": link(call, f"/resource_classes/{name}")}]}


def list_resource_classes(call: Call) -> Reply:
    rows = call.db.read(names.list_resource_classes)
    return json_response(
        call,
        {"resource_classes": [_view(call, r["name"]) for r in rows]},
        last_modified=latest(*(r["updated_at"] for r in rows)),
    )


def create_resource_class(call: Call) -> Reply:
    body = call.json_body(RESOURCE_CLASS_BODY)
    if not call.db.write(lambda conn: names.create_resource_class(conn, body["name"])):
        raise DuplicateName(f"Conflicting resource class already exists: {body['name']}")
    return empty_response(201, {"Location": location(call, f"/resource_classes/{body['name']}")})


def show_resource_class(call: Call, name: str) -> Reply:
    row = call.db.read(lambda conn: names.get_resource_class(conn, name))
    if row is None:
        raise NotFound(f"No such resource class {name}.")
    return json_response(call, _view(call, name), last_modified=row["updated_at"])


def update_resource_class(call: Call, name: str) -> Reply:
    if call.version >= mv.PUT_RESOURCE_CLASS:
        return _ensure_resource_class(call, name)
    body = call.json_body(RESOURCE_CLASS_BODY)
    call.db.write(lambda conn: names.update_resource_class(conn, name, body["name"]))
    return json_response(call, _view(call, body["name"]))


def _ensure_resource_class(call: Call, name: str) -> Reply:
    """1.7: PUT creates a custom class, or confirms it exists."""
    # The path's name is held to the same schema as a POST body, with the same message.
    validate({"name": name}, RESOURCE_CLASS_BODY)

    created = call.db.write(lambda conn: names.create_resource_class(conn, name))
    return empty_response(201 if created else 204, {"Location": location(call, f"/resource_classes/{name}")})


def delete_resource_class(call: Call, name: str) -> Reply:
    call.db.write(lambda conn: names.delete_resource_class(conn, name))
    return empty_response()
