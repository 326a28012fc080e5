"""``/operations``: the journal's operations, newest first; a project's readers see those of its
servers, the admin every one."""

from __future__ import annotations

from berth.conductor.api import paging, views
from berth.conductor.api.handlers.servers import owned_row, plane_of
from berth.conductor.errors import OPERATION_NOT_FOUND
from berth.conductor.journal import STATES
from berth.domain.errors import BadRequest, Forbidden, NotFound
from berth.web.app import WebCall
from berth.web.responses import Reply


def index(call: WebCall) -> Reply:
    args = call.request.args
    server_id = args.get("server_id")
    state = args.get("state")
    if state is not None and state not in STATES:
        raise BadRequest(f"Invalid state {state!r}; one of {', '.join(STATES)}.")
    limit = paging.page_limit(args)
    if server_id is not None:
        owned_row(call, server_id, "berth:servers:show", deleted=True)
    else:
        call.authorize("berth:servers:index:all_projects")
    journal = plane_of(call).journal
    marker = args.get("marker")
    after = journal.get(marker) if marker is not None else None
    if marker is not None and (after is None or (server_id is not None and after.instance_uuid != server_id)):
        raise paging.marker_not_found(marker)
    found = journal.find(instance_uuid=server_id, state=state, kind=args.get("kind"), limit=limit, after=after)
    shown = [views.operation(op) for op in found]
    return views.reply({"operations": shown, **paging.links(call.request, "operations", shown, limit)})


def show(call: WebCall, operation_id: str) -> Reply:
    found = plane_of(call).journal.get(operation_id)
    if found is None:
        raise NotFound(f"No operation with id {operation_id}.", code=OPERATION_NOT_FOUND)
    try:
        owned_row(call, found.instance_uuid, "berth:operations:show", deleted=True)
    except NotFound:
        # No server (a build that never wrote it): its operations are the admin's to read.
        try:
            call.authorize("berth:servers:index:all_projects")
        except Forbidden:
            raise NotFound(f"No operation with id {operation_id}.", code=OPERATION_NOT_FOUND) from None
    return views.reply({"operation": views.operation(found)})
