"""``POST /servers/{id}/action``: one action, named by the body's only key as in Nova's API, started
and answered at once (202) with its operation; and ``POST /hosts/{name}/evacuate``."""

from __future__ import annotations

from typing import Any

from berth.conductor.api import policy, schemas, views
from berth.conductor.api.handlers.servers import owned_row, plane_of
from berth.conductor.errors import RESIZE_SAME_FLAVOR
from berth.conductor.records import server_states
from berth.conductor.records.flavors import to_flavor
from berth.conductor.requests import ServerRequest
from berth.domain.errors import BadRequest, NotFound
from berth.web.app import WebCall
from berth.web.responses import Reply


def act(call: WebCall, server_id: str) -> Reply:
    body = call.json_body()
    schemas.named_host(body)
    body = schemas.check(body, schemas.SERVER_ACTION)
    [(action, arguments)] = body.items()
    row = owned_row(call, server_id, "berth:servers:action")
    if action in policy.ADMIN_ACTIONS:
        call.authorize("berth:servers:action:admin")
    plane = plane_of(call)
    # The server's state first, as Nova checks it before it reads a resize's flavor.
    plane.check_action(row, action)
    args: dict[str, Any] = {}
    if action == "resize":
        try:
            args["flavor"] = to_flavor(plane.flavors.get(views.flavor_ref(arguments["flavorRef"])))
        except NotFound as e:
            raise BadRequest(e.detail, code=e.code) from None
        if args["flavor"] == ServerRequest.from_dict(row["request"]).flavor:
            # As Nova refuses it; a move to another host in the same flavor is a migration.
            raise BadRequest(
                f"Server {server_id} already has flavor {args['flavor'].name!r}: a resize must change the "
                "flavor (migrate the server to move it in the same flavor).",
                code=RESIZE_SAME_FLAVOR,
            )
    if action == "unshelve" and arguments and "availability_zone" in arguments:
        # Given (null too: unpinned), the zone the server is unshelved into, and keeps. As Nova checks
        # them, a server that is not offloaded is refused first (the action's start), then the zone.
        args["availability_zone"] = zone = arguments["availability_zone"]
        if zone is not None and row["status"] == server_states.SHELVED_OFFLOADED:
            plane.check_zone(zone)
    started = plane.act(server_id, action, args, row=row)
    return views.reply(
        {"operation": views.operation(started)}, 202, views.location(call.request, f"/operations/{started.id}")
    )


def evacuate_host(call: WebCall, name: str) -> Reply:
    started, left = plane_of(call).evacuate_host(name)
    return views.reply(
        {
            "operations": [views.operation(op) for op in started],
            "left": [{"server_id": server, "reason": reason} for server, reason in left.items()],
        },
        202,
    )
