"""The conductor's errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from berth.clients.conductor import HOST_NAME_TAKEN as HOST_NAME_TAKEN
from berth.domain.errors import Conflict
from berth.scheduler.explain import NoValidHost as SchedulerNoValidHost


class ConductorError(Exception):
    """An operation could not be done (its journal row says what was undone)."""


class CannotGoOn(ConductorError):
    """An operation past its point of no return whose next step can never be done: what it was for
    is gone (a server rebuilt while a pick preempted it, its claim dropped). It ends failed, with
    nothing left to undo, rather than being left to resumes that would fail the same way for ever
    (and keep the server busy, so that nothing else could end it)."""


class UnknownHost(ConductorError):
    """No agent is known for a host an operation needs."""


class NoValidHost(SchedulerNoValidHost, ConductorError):
    """Every host tried refused the instance: ``attempts`` holds, per host, why (the scheduler's own
    NoValidHost when it found none, as the first attempt's reason)."""

    def __init__(self, instance_uuid: str, attempts: Sequence[dict[str, Any]], candidates: int = 0):
        tried = "; ".join(f"{a.get('host') or 'scheduler'}: {a['reason']}" for a in attempts)
        super().__init__(
            f"No valid host for instance {instance_uuid} after {len(attempts)} attempt(s): {tried}",
            candidates=candidates,
            refused_claims=[str(a["host"]) for a in attempts if a.get("host")],
        )
        self.attempts = list(attempts)


# -- what the conductors' API refuses, with the codes its callers match on ------------------------

SERVER_NOT_FOUND: Final = "berth.server.not_found"
SERVER_BUSY: Final = "berth.server.busy"
SERVER_INVALID_STATE: Final = "berth.server.invalid_state"
# A multi-create whose gang the scheduler could not place (at least min_count of it): nothing made.
SERVER_NO_VALID_HOST: Final = "berth.server.no_valid_host"
FLAVOR_NOT_FOUND: Final = "berth.flavor.not_found"
FLAVOR_DUPLICATE: Final = "berth.flavor.duplicate"
# A flavor that has no such extra spec (Nova: "Flavor X has no extra specs with key Y", 404).
FLAVOR_EXTRA_SPEC_NOT_FOUND: Final = "berth.flavor.extra_spec_not_found"
FLAVOR_INVALID: Final = "berth.flavor.invalid"
# A resize to the flavor the server has already (Nova: "instances must change flavor").
RESIZE_SAME_FLAVOR: Final = "berth.server.resize_same_flavor"
SERVER_GROUP_NOT_FOUND: Final = "berth.server_group.not_found"
SERVER_GROUP_IN_USE: Final = "berth.server_group.in_use"
HOST_NOT_FOUND: Final = "berth.host.not_found"
# A server asked for a zone no registered host is in.
ZONE_NOT_FOUND: Final = "berth.availability_zone.not_found"
HOST_UP: Final = "berth.host.up"
# The server's host is down, and the action needs it (anything but delete, evacuate and shelve-offload).
HOST_DOWN: Final = "berth.host.down"
# A registered host whose compute node the service does not have yet (its agent has not reported it).
HOST_NOT_REPORTED: Final = "berth.host.not_reported"
HOST_IN_USE: Final = "berth.host.in_use"
HOST_REGISTERED_BY_ANOTHER: Final = "berth.host.registered_by_another"
# HOST_NAME_TAKEN (imported above): another agent, whose heartbeats are fresh, holds the host's name.
# Its value is kept with the conductors' client, whose caller (the agent's registration) acts on it.
OPERATION_NOT_FOUND: Final = "berth.operation.not_found"
# A list's query parameter that is not one (a limit below 0, say).
QUERY_INVALID: Final = "berth.query.invalid"
# A list's marker that names no item of the list (Nova: "marker [...] not found").
MARKER_NOT_FOUND: Final = "berth.marker.not_found"
OPERATION_REFUSED: Final = "berth.operation.refused"
# The conductors' database could not be reached (restarting, or failing over to its standby).
DATABASE_UNAVAILABLE: Final = "berth.database.unavailable"


class ServerBusy(Conflict):
    """Another operation runs on the server: one at a time, whichever conductor was asked."""

    code = SERVER_BUSY


class InvalidState(Conflict):
    """The server's state does not allow the action (a resize of a shelved server)."""

    code = SERVER_INVALID_STATE


class Refused(Conflict):
    """The conductor refused the operation before it started (``ConductorError``: no allocations
    to move, a move finished already): nothing was written."""

    code = OPERATION_REFUSED
