"""``POST /servers/{id}/action``: one action, named by the body's only key as in Nova's API, started
and answered at once (202) with its operation; and ``POST /hosts/{name}/evacuate``."""

from __future__ import annotations

from typing import Any

from berth.conductor.api import policy, schemas, views
from berth.conductor.api.handlers.servers import owned_row, plane_of
from berth.conductor.records.flavors import to_flavor
from berth.domain.errors import BadRequest, NotFound
from berth.web.app import WebCall
from berth.web.responses import Reply


def act(call: WebCall, server_id: str) -> Reply:
    body = schemas.check(call.json_body(), schemas.SERVER_ACTION)
    [(action, arguments)] = body.items()
    owned_row(call, server_id, "berth:servers:action")
    if action in policy.ADMIN_ACTIONS:
        call.authorize("berth:servers:action:admin")
    plane = plane_of(call)
    args: dict[str, Any] = {}
    if action == "resize":
        try:
            args["flavor"] = to_flavor(plane.flavors.get(arguments["flavorRef"]))
        except NotFound as e:
            raise BadRequest(e.detail, code=e.code) from None
    started = plane.act(server_id, action, args)
    return views.reply({"operation": views.operation(started)}, 202, {"Location": f"/operations/{started.id}"})


def evacuate_host(call: WebCall, name: str) -> Reply:
    started, left = plane_of(call).evacuate_host(name)
    return views.reply(
        {
            "operations": [views.operation(op) for op in started],
            "left": [{"server_id": server, "reason": reason} for server, reason in left.items()],
        },
        202,
    )
