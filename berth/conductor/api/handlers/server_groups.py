"""``/os-server-groups``: a policy and its rules; the members are the servers that joined it."""

from __future__ import annotations

from typing import Any

from berth.conductor.api import schemas, views
from berth.conductor.api.handlers.servers import plane_of
from berth.conductor.errors import SERVER_GROUP_NOT_FOUND
from berth.domain.errors import BadRequest, Forbidden, NotFound
from berth.web.app import WebCall
from berth.web.responses import Reply, empty_response


def _owned(call: WebCall, group_id: str, rule: str) -> dict[str, Any]:
    row = plane_of(call).groups.get(group_id)
    try:
        call.authorize(rule, {"project_id": row["project_id"], "user_id": row["user_id"]})
    except Forbidden:
        if call.caller is not None and call.caller.project_id != row["project_id"]:
            raise NotFound(f"No server group with id {group_id}.", code=SERVER_GROUP_NOT_FOUND) from None
        raise
    return row


def create(call: WebCall) -> Reply:
    asked = schemas.check(call.json_body(), schemas.SERVER_GROUP_CREATE)["server_group"]
    if ("policy" in asked) == ("policies" in asked):
        raise BadRequest(
            "Give the group's policy as 'policy' (or, as Nova took it before its microversion 2.64, as "
            "'policies' with the one policy in a list), not both and not neither."
        )
    policy = asked["policy"] if "policy" in asked else asked["policies"][0]
    # A rule given as digits, as Nova takes it, read as its number and checked again as that.
    rules = schemas.digits_read(asked.get("rules") or {}, ("max_server_per_host",))
    schemas.check({"server_group": {**asked, "rules": rules}}, schemas.SERVER_GROUP_CREATE)
    if rules and policy != "anti-affinity":
        # As Nova refuses them: a rule the policy never reads would be kept and shown as if it held.
        raise BadRequest(f"Only anti-affinity policy supports rules, not the {policy} policy.")
    assert call.caller is not None
    plane = plane_of(call)
    group_id = plane.groups.create(asked["name"], policy, rules, call.caller.project_id, call.caller.user_id)
    return views.reply({"server_group": views.server_group(plane.groups.get(group_id), [])})


def index(call: WebCall) -> Reply:
    assert call.caller is not None
    plane = plane_of(call)
    # As Nova reads it: present, with any value or none, it asks for every project's groups.
    every = "all_projects" in call.request.args
    if every:
        call.authorize("berth:server_groups:index:all_projects")
    rows = plane.groups.all(None if every else call.caller.project_id)
    return views.reply({"server_groups": [views.server_group(r, plane.servers.in_group(r["id"])) for r in rows]})


def show(call: WebCall, group_id: str) -> Reply:
    row = _owned(call, group_id, "berth:server_groups:show")
    return views.reply({"server_group": views.server_group(row, plane_of(call).servers.in_group(group_id))})


def delete(call: WebCall, group_id: str) -> Reply:
    _owned(call, group_id, "berth:server_groups:delete")
    plane_of(call).groups.delete(group_id)
    return empty_response(204)
