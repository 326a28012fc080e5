"""``/operations``: the journal's operations, newest first; a project's readers see those of its
servers, the admin every one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from berth.conductor.api import paging, views
from berth.conductor.api.handlers.servers import owned_row, plane_of
from berth.conductor.control.plane import ControlPlane
from berth.conductor.errors import OPERATION_NOT_FOUND, QUERY_INVALID
from berth.conductor.journal import STATES, Operation
from berth.conductor.operations import build
from berth.conductor.records import server_states
from berth.domain.errors import BadRequest, Forbidden, NotFound
from berth.web.app import WebCall
from berth.web.responses import Reply

# Every kind of operation the journal holds: those a server's state allows or refuses (every
# operation on a server but its build), the build, and the clean-ups that take no slot.
KINDS: Final = tuple(sorted({build.KIND, *server_states.ALLOWED, *server_states.SLOTLESS}))
# Who may read the operations of every project's servers (and of none: a build that never wrote its
# server), or of another project's.
EVERY_PROJECT_RULE: Final = "berth:operations:index:all_projects"


def index(call: WebCall) -> Reply:
    args = call.request.args
    server_id = args.get("server_id")
    state = args.get("state")
    if state is not None and state not in STATES:
        raise BadRequest(f"Invalid state {state!r}; one of {', '.join(STATES)}.", code=QUERY_INVALID)
    kind = args.get("kind")
    if kind is not None and kind not in KINDS:
        raise BadRequest(f"Invalid kind {kind!r}; one of {', '.join(KINDS)}.", code=QUERY_INVALID)
    limit = paging.page_limit(args)
    project: str | None = None
    if server_id is not None:
        owned_row(call, server_id, "berth:servers:show", deleted=True)
    else:
        project = _project(call, args)
    plane = plane_of(call)
    journal = plane.journal
    marker = args.get("marker")
    after = journal.get(marker) if marker is not None else None
    if marker is not None and (
        after is None
        or (server_id is not None and after.instance_uuid != server_id)
        or (project is not None and not _of_project(plane, after, project))
    ):
        raise paging.marker_not_found(marker)
    found = journal.find(instance_uuid=server_id, state=state, kind=kind, project_id=project, limit=limit, after=after)
    shown = [views.operation(op) for op in found]
    return views.reply({"operations": shown, **paging.links(call.request, "operations", shown, limit)})


def _project(call: WebCall, args: Mapping[str, str]) -> str | None:
    """The project whose servers' operations are listed, None for every project's. As the servers'
    list: ``all_projects`` or another project than the caller's needs the rule of every project;
    asking for neither, a caller it grants sees every project's (as the admin always has), any
    other its own project's."""
    assert call.caller is not None
    every = paging.asks_every_project(args)
    asked = args.get("project_id") or args.get("tenant_id")
    own = call.caller.project_id
    if every or (asked and asked != own):
        call.authorize(EVERY_PROJECT_RULE)
        return asked
    if asked:
        return own
    try:
        call.authorize(EVERY_PROJECT_RULE)
    except Forbidden:
        return own
    return None


def _of_project(plane: ControlPlane, operation: Operation, project: str) -> bool:
    try:
        row = plane.servers.get(operation.instance_uuid, deleted=True)
    except NotFound:
        return False
    return bool(row["project_id"] == project)


def show(call: WebCall, operation_id: str) -> Reply:
    found = plane_of(call).journal.get(operation_id)
    if found is None:
        raise NotFound(f"No operation with id {operation_id}.", code=OPERATION_NOT_FOUND)
    try:
        owned_row(call, found.instance_uuid, "berth:operations:show", deleted=True)
    except NotFound:
        # No server (a build that never wrote it): its operations are the admin's to read.
        try:
            call.authorize(EVERY_PROJECT_RULE)
        except Forbidden:
            raise NotFound(f"No operation with id {operation_id}.", code=OPERATION_NOT_FOUND) from None
    return views.reply({"operation": views.operation(found)})
