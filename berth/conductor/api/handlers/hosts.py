"""``/hosts``: an agent registers (and beats) with ``PUT /hosts/{name}``; the admin lists them, sees
which are up, disables and enables them, retires them, and evacuates the servers of one that is down."""

from __future__ import annotations

from berth.conductor.api import schemas, views
from berth.conductor.api.handlers.servers import plane_of
from berth.conductor.records.hosts import Host, HostEntry
from berth.domain.errors import BadRequest
from berth.web.app import WebCall
from berth.web.responses import Reply, empty_response


def _admin(call: WebCall) -> bool:
    return call.caller is not None and "admin" in call.caller.roles


def register(call: WebCall, name: str) -> Reply:
    """An agent registers its host (or beats); with ``?dry_run=1`` the registration is only checked:
    204 when it would be taken, the refusal it would meet otherwise, and nothing written (an agent
    asks so as it starts, before it serves)."""
    asked = schemas.check(call.json_body(), schemas.HOST_REGISTER)["host"]
    # The name as ``PUT /hosts`` takes it (its column's length): a longer one would be written
    # as it is on SQLite and fail on PostgreSQL.
    if len(name) > schemas.NAME_LENGTH:
        raise BadRequest(f"A host's name is at most {schemas.NAME_LENGTH} characters long, not {len(name)}.")
    assert call.caller is not None
    if call.request.args.get("dry_run", "").lower() in ("1", "true", "yes"):
        entry = HostEntry(asked["url"], asked.get("zone"), asked.get("agent_token"), asked.get("agent_id"))
        plane_of(call).hosts.check(name, entry, call.caller.user_id, admin=_admin(call))
        return empty_response(204)
    host = plane_of(call).register_host(
        name,
        asked["url"],
        asked.get("zone"),
        asked.get("agent_token"),
        call.caller.user_id,
        admin=_admin(call),
        agent_id=asked.get("agent_id"),
    )
    return views.reply({"host": views.host(host)})


def register_many(call: WebCall) -> Reply:
    """Several hosts registered (or beating) at once:
    ``{"hosts": [{"name", "url", "zone"?, "agent_token"?, "agent_id"?}]}``."""
    asked = schemas.check(call.json_body(), schemas.HOSTS_REGISTER)["hosts"]
    assert call.caller is not None
    entries = {h["name"]: HostEntry(h["url"], h.get("zone"), h.get("agent_token"), h.get("agent_id")) for h in asked}
    if len(entries) != len(asked):
        raise BadRequest("A host is named twice in the list.")
    beaten, registered = plane_of(call).register_hosts(entries, call.caller.user_id, admin=_admin(call))
    return views.reply({"beaten": len(beaten), "registered": [views.host(h) for h in registered]})


def index(call: WebCall) -> Reply:
    plane = plane_of(call)
    counts = plane.servers.count_by_host()
    return views.reply({"hosts": [views.host(h, counts.get(h.name, 0)) for h in plane.hosts.all()]})


def _shown(call: WebCall, found: Host) -> Reply:
    """A host as ``GET /hosts/{name}`` shows it: with the number of servers on it."""
    return views.reply({"host": views.host(found, plane_of(call).servers.count_by_host().get(found.name, 0))})


def show(call: WebCall, name: str) -> Reply:
    return _shown(call, plane_of(call).hosts.get(name))


def disable(call: WebCall, name: str) -> Reply:
    asked = schemas.check(call.json_body() if call.request.content_length else None, schemas.HOST_DISABLE) or {}
    return _shown(call, plane_of(call).set_host_disabled(name, True, asked.get("reason")))


def enable(call: WebCall, name: str) -> Reply:
    return _shown(call, plane_of(call).set_host_disabled(name, False))


def retire(call: WebCall, name: str) -> Reply:
    assert call.caller is not None
    plane_of(call).retire_host(name, call.caller.user_id, admin=_admin(call))
    return empty_response(204)
