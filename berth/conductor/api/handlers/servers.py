"""``/servers``: create (one or several), list, show, delete; and a server's operations."""

from __future__ import annotations

import re
import uuid
from typing import Any

from berth.conductor.api import paging, schemas, views
from berth.conductor.control.plane import ControlPlane, Who
from berth.conductor.errors import QUERY_INVALID, SERVER_GROUP_NOT_FOUND, SERVER_NOT_FOUND
from berth.conductor.records import server_states
from berth.conductor.records.flavors import to_flavor
from berth.conductor.records.servers import ServerFilter
from berth.domain.errors import BadRequest, Forbidden, NotFound
from berth.scheduler.errors import SchedulerError
from berth.scheduler.request.flavor import Image
from berth.scheduler.request.request_spec import build_request_spec
from berth.web.app import WebCall
from berth.web.responses import Reply


def plane_of(call: WebCall) -> ControlPlane:
    plane: ControlPlane = call.context
    return plane


def owned_row(call: WebCall, server_id: str, rule: str, *, deleted: bool = False) -> dict[str, Any]:
    """The server's row, if the caller may ``rule`` it; a server of another project is not found,
    as Nova answers, rather than forbidden. ``deleted``: a deleted server's row too (its operations
    stay readable, as Nova's instance actions do)."""
    row = plane_of(call).servers.get(server_id, deleted=deleted)
    try:
        call.authorize(rule, {"project_id": row["project_id"], "user_id": row["user_id"]})
    except Forbidden:
        if call.caller is not None and call.caller.project_id != row["project_id"]:
            raise NotFound(f"No server with id {server_id}.", code=SERVER_NOT_FOUND) from None
        raise
    return row


def create(call: WebCall) -> Reply:
    body = schemas.check(call.json_body(), schemas.SERVER_CREATE)
    # Counts given as digits, as Nova takes them, read as their numbers and checked again as those.
    asked = schemas.digits_read(body["server"], schemas.COUNTS)
    schemas.check({**body, "server": asked}, schemas.SERVER_CREATE)
    assert call.caller is not None
    minimum = int(asked.get("min_count", 1))
    count = int(asked.get("max_count", minimum))
    if minimum > count:
        raise BadRequest(f"min_count ({minimum}) may not be above max_count ({count}).")
    group = (body.get("os:scheduler_hints") or {}).get("group")
    plane = plane_of(call)
    try:
        if group is not None:
            _group_to_join(call, group)
        _check_image(plane, views.flavor_ref(asked["flavorRef"]), asked.get("image_properties"))
        builds = plane.create_servers(
            Who(call.caller.project_id, call.caller.user_id),
            name=asked["name"],
            flavor_ref=views.flavor_ref(asked["flavorRef"]),
            image_properties=asked.get("image_properties"),
            metadata=asked.get("metadata"),
            zone=asked.get("availability_zone"),
            group_id=group,
            count=count,
            min_count=minimum if count > 1 else None,
        )
    except NotFound as e:  # a flavor or group named in the body: the body is wrong, not the path
        raise BadRequest(e.detail, code=e.code) from None
    made = [{"id": b.instance_uuid, "operation_id": b.id} for b in builds]
    location = views.location(call.request, f"/servers/{made[0]['id']}")
    if count == 1:
        return views.reply({"server": made[0]}, 202, location)
    return views.reply({"reservation_id": f"r-{uuid.uuid4().hex[:8]}", "servers": made}, 202, location)


def _check_image(plane: ControlPlane, flavor_ref: str, properties: dict[str, str] | None) -> None:
    """BadRequest unless the image's properties, with the flavor's extra specs, make a request spec
    (as the flavor's own were checked when it was made): else a single build would fail in its
    schedule step, its server written in ERROR, and a multi-create's gang pick would fail unexpectedly."""
    if not properties:
        return
    flavor = to_flavor(plane.flavors.get(flavor_ref))
    try:
        build_request_spec(
            flavor, Image(dict(properties)), project_id="check", user_id="check", config=plane.scheduler_config
        )
    except SchedulerError as e:
        raise BadRequest(f"Invalid image_properties with flavor {flavor.name!r}: {e}") from None


def _group_to_join(call: WebCall, group_id: str) -> None:
    """NotFound unless the caller may read the server group its new servers would join: a group
    is looked up within the caller's project, as Nova does (an admin's reaches every project's).
    Joining another project's group would take its hosts' places and keep its owner from deleting it."""
    row = plane_of(call).groups.get(group_id)
    try:
        call.authorize("berth:server_groups:show", {"project_id": row["project_id"], "user_id": row["user_id"]})
    except Forbidden:
        raise NotFound(f"No server group with id {group_id}.", code=SERVER_GROUP_NOT_FOUND) from None


def index(call: WebCall) -> Reply:
    call.authorize("berth:servers:index")
    assert call.caller is not None
    args = call.request.args
    every_project = paging.asks_every_project(args)
    project = args.get("project_id") or args.get("tenant_id")
    if every_project or (project and project != call.caller.project_id):
        call.authorize("berth:servers:index:all_projects")
    else:
        project = call.caller.project_id
    name = args.get("name")
    if name is not None:
        try:
            re.compile(name)
        except re.error as e:
            raise BadRequest(
                f"Invalid name {name!r}: a regular expression is expected ({e}).", code=QUERY_INVALID
            ) from None
    status = args.get("status")
    if status is not None and status.upper() not in server_states.STATUSES:
        raise BadRequest(f"Invalid status {status!r}; one of {', '.join(server_states.STATUSES)}.", code=QUERY_INVALID)
    where = ServerFilter(
        project_id=project,
        host=args.get("host"),
        status=status.upper() if status else None,
        name=name,
        # The deleted servers only, as Nova lists them for ``deleted=1``; DELETED servers are only among
        # them: asking for that status asks for them, as Nova takes it.
        deleted=args.get("deleted", "").lower() in ("1", "true", "yes") or (status or "").upper() == "DELETED",
    )
    plane = plane_of(call)
    limit = paging.page_limit(args)
    after = _marker_row(plane, args.get("marker"), where)
    rows = plane.servers.all(where, limit=limit, after=after)
    running = {op.id: op for op in plane.journal.running()} if any(r["operation_id"] for r in rows) else {}
    zones = plane.hosts.zones_of({r["host"] for r in rows if r["host"]})
    shown = [views.server(r, running.get(r["operation_id"]), host_zone=zones.get(r["host"])) for r in rows]
    return views.reply({"servers": shown, **paging.links(call.request, "servers", shown, limit)})


def _marker_row(plane: ControlPlane, marker: str | None, where: ServerFilter) -> dict[str, Any] | None:
    """The row of the server a list's page starts after; a 400 when the list could not have shown
    it (another project's, say). A server deleted since the page before was read is still the
    marker, as Nova reads one (else a list read page by page fails whenever a page's last server
    is deleted meanwhile)."""
    if marker is None:
        return None
    try:
        row = plane.servers.get(marker, deleted=True)
    except NotFound:
        raise paging.marker_not_found(marker) from None
    if where.project_id is not None and row["project_id"] != where.project_id:
        raise paging.marker_not_found(marker)
    return row


def show(call: WebCall, server_id: str) -> Reply:
    row = owned_row(call, server_id, "berth:servers:show")
    plane = plane_of(call)
    running = plane.journal.get(row["operation_id"]) if row["operation_id"] else None
    allocations = plane.placement.get(f"/allocations/{server_id}")["allocations"]
    zone = plane.hosts.zones_of([row["host"]]).get(row["host"]) if row["host"] else None
    return views.reply({"server": views.server(row, running, allocations, host_zone=zone)})


def delete(call: WebCall, server_id: str) -> Reply:
    row = owned_row(call, server_id, "berth:servers:delete")
    started = plane_of(call).delete(server_id, row=row)
    return views.reply(
        {"operation": views.operation(started)}, 202, views.location(call.request, f"/operations/{started.id}")
    )


def operations(call: WebCall, server_id: str) -> Reply:
    owned_row(call, server_id, "berth:servers:show", deleted=True)
    found = plane_of(call).journal.find(instance_uuid=server_id)
    return views.reply({"operations": [views.operation(op) for op in found]})
