"""``/flavors`` and their ``os-extra_specs``, as Nova's API shapes them."""

from __future__ import annotations

from berth.conductor.api import schemas, views
from berth.conductor.api.handlers.servers import plane_of
from berth.domain.errors import BadRequest
from berth.web.app import WebCall
from berth.web.responses import Reply, empty_response


def create(call: WebCall) -> Reply:
    asked = schemas.check(call.json_body(), schemas.FLAVOR_CREATE)["flavor"]
    # Sizes given as digits, as Nova takes them, read as their numbers and checked again as those.
    asked = schemas.digits_read(asked, schemas.FLAVOR_SIZES)
    schemas.check({"flavor": asked}, schemas.FLAVOR_CREATE)
    # Nova's clients send both with every create, at Nova's defaults, which are all Berth has: it
    # refuses other values rather than ignore them.
    if asked.pop("rxtx_factor", 1.0) != 1.0:
        raise BadRequest("rxtx_factor must be 1.0 if given: Berth keeps no network bandwidth factor.")
    if not asked.pop("os-flavor-access:is_public", True):
        raise BadRequest("os-flavor-access:is_public must be true if given: every flavor is public in Berth.")
    fields = {
        **asked,
        "ephemeral": asked.get("OS-FLV-EXT-DATA:ephemeral", asked.get("ephemeral", 0)),
    }
    return views.reply({"flavor": views.flavor(plane_of(call).flavors.create(fields))})


def index(call: WebCall) -> Reply:
    return views.reply({"flavors": [views.flavor(r) for r in plane_of(call).flavors.all()]})


def show(call: WebCall, flavor_id: str) -> Reply:
    return views.reply({"flavor": views.flavor(plane_of(call).flavors.get(flavor_id))})


def delete(call: WebCall, flavor_id: str) -> Reply:
    plane_of(call).flavors.delete(flavor_id)
    return empty_response(202)


def extra_specs(call: WebCall, flavor_id: str) -> Reply:
    return views.reply({"extra_specs": dict(plane_of(call).flavors.get(flavor_id)["extra_specs"])})


def set_extra_specs(call: WebCall, flavor_id: str) -> Reply:
    """Nova answers with the extra specs it was sent, not with all the flavor has: those, as kept (as
    their text, as ``update_extra_spec`` answers one)."""
    specs = schemas.check(call.json_body(), schemas.EXTRA_SPECS)["extra_specs"]
    kept = plane_of(call).flavors.set_extra_specs(flavor_id, specs)["extra_specs"]
    return views.reply({"extra_specs": {key: kept[key] for key in specs}})


def show_extra_spec(call: WebCall, flavor_id: str, key: str) -> Reply:
    """One extra spec of a flavor, ``{"KEY": "VALUE"}``."""
    return views.reply({key: plane_of(call).flavors.extra_spec(flavor_id, key)})


def update_extra_spec(call: WebCall, flavor_id: str, key: str) -> Reply:
    """One extra spec set (``{"KEY": "VALUE"}``, the key the path's), checked with the flavor's others."""
    body = schemas.check(call.json_body(), schemas.EXTRA_SPEC_UPDATE)
    [(asked, value)] = body.items()
    if asked != key:
        raise BadRequest(f"Request body and URI mismatch: the body sets {asked!r}, the path names {key!r}.")
    specs = plane_of(call).flavors.set_extra_specs(flavor_id, {key: value})["extra_specs"]
    return views.reply({key: specs[key]})


def unset_extra_spec(call: WebCall, flavor_id: str, key: str) -> Reply:
    plane_of(call).flavors.unset_extra_spec(flavor_id, key)
    return empty_response(200)
