"""What the API shows: servers (in the shape of Nova's server, its extended attributes included),
operations, hosts, flavors and server groups, from their rows; and the JSON reply that carries them."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson
from werkzeug.wrappers import Request

from berth.conductor.journal import Operation
from berth.conductor.operations.moves import REVERT
from berth.conductor.records import server_states
from berth.conductor.records.hosts import Host
from berth.conductor.records.tables import Record
from berth.conductor.runner import STEPS_DONE
from berth.web.responses import Reply


def reply(body: object, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(orjson.dumps(body), status, headers=headers)


def location(request: Request, path: str) -> dict[str, str]:
    """The ``Location`` header naming ``path`` of this API, absolute as Nova's (and the lists'
    ``*_links``) are, whatever address the caller reached the API at."""
    return {"Location": f"{request.url_root.rstrip('/')}{path}"}


def flavor_ref(ref: str | int) -> str:
    """A ``flavorRef`` as the flavor's id or name: Nova takes a flavor's URL too (its last path
    segment is the id), and an id as a number."""
    ref = str(ref)
    parts = urlsplit(ref)
    if parts.scheme in ("http", "https") and parts.netloc:
        return unquote(parts.path.rstrip("/").rsplit("/", 1)[-1])
    return ref


def moment(seconds: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601, UTC, as Nova writes its times."""
    if seconds is None:
        return None
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def flavor_of_request(request: Mapping[str, Any]) -> dict[str, Any]:
    flavor = request["flavor"]
    return {
        "original_name": flavor["name"],
        "vcpus": flavor["vcpus"],
        "ram": flavor["memory_mb"],
        "disk": flavor.get("root_gb", 0),
        "ephemeral": flavor.get("ephemeral_gb", 0),
        "swap": flavor.get("swap_mb", 0),
        "extra_specs": dict(flavor.get("extra_specs") or {}),
    }


def server(
    row: Record, running: Operation | None = None, allocations: object = None, host_zone: str | None = None
) -> dict[str, Any]:
    """``host_zone``: the zone of the server's host. Nova shows a placed server in its host's zone,
    whether or not one was asked for (the conductor records it once the server is placed, and a
    move records the destination's); a server on no host (shelved and offloaded) the zone of the
    host it was last on, or, never placed, the zone it asked for."""
    request = row["request"]
    kind = running.kind if running is not None else None
    shown: dict[str, Any] = {
        "id": row["id"],
        "name": row["name"],
        "status": server_states.shown_status(row["status"], kind),
        "tenant_id": row["project_id"],
        "user_id": row["user_id"],
        "flavor": flavor_of_request(request),
        "image": {"properties": dict(request.get("image") or {})},
        "metadata": dict(request.get("metadata") or {}),
        "OS-EXT-SRV-ATTR:host": row["host"],
        "OS-EXT-AZ:availability_zone": (host_zone if row["host"] else row["zone"]) or request.get("availability_zone"),
        "OS-EXT-STS:vm_state": server_states.VM_STATES[row["status"]],
        "OS-EXT-STS:task_state": server_states.task_state(kind),
        "server_groups": [row["group_id"]] if row["group_id"] else [],
        "operation": operation_summary(running) if running is not None else None,
        "created": moment(row["created_at"]),
        "updated": moment(row["updated_at"]),
    }
    if row["fault"]:
        # Nova's fault: the operation's error as its message, when it ended, and 500 (what Nova
        # records for a failure of its own, a host that refused or none left, as here).
        shown["fault"] = {"code": 500, "created": moment(row["fault_at"]), "message": row["fault"]}
    if row["deleted_at"] is not None:
        shown["deleted"] = moment(row["deleted_at"])
    if allocations is not None:
        shown["allocations"] = allocations
    return shown


def operation_summary(operation: Operation) -> dict[str, Any]:
    return {"id": operation.id, "kind": operation.kind, "state": operation.state, "step": operation.step or None}


def _host_of(op: Operation) -> str | None:
    """Where the operation leaves the server: a move's destination, a build's host, the host it ran
    on; a revert's is the move's source, where the server goes back to."""
    selections, request = op.selections, op.request
    if op.kind == REVERT:
        return request.get("source")
    return selections.get("dest") or selections.get("host") or request.get("dest") or request.get("host")


def operation(op: Operation) -> dict[str, Any]:
    selections, request = op.selections, op.request
    return {
        **operation_summary(op),
        "server_id": op.instance_uuid,
        "steps_done": list(selections.get(STEPS_DONE) or []),
        "source": request.get("source"),
        "host": _host_of(op),
        "attempts": [{"host": a.get("host"), "reason": a.get("reason")} for a in op.attempts],
        "error": op.error,
        "owner": op.owner or None,
        "created_at": moment(op.created_at),
        "updated_at": moment(op.updated_at),
    }


def host(found: Host, servers: int | None = None) -> dict[str, Any]:
    shown = found.to_dict()
    if servers is not None:
        shown["servers"] = servers
    return shown


def flavor(row: Record) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "vcpus": row["vcpus"],
        "ram": row["ram"],
        "disk": row["disk"],
        "OS-FLV-EXT-DATA:ephemeral": row["ephemeral"],
        "swap": row["swap"],
        "extra_specs": dict(row["extra_specs"]),
        # As Nova shows them: every flavor is public and enabled, and has no bandwidth factor.
        "os-flavor-access:is_public": True,
        "OS-FLV-DISABLED:disabled": False,
        "rxtx_factor": 1.0,
    }


def server_group(row: Record, members: list[str]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "policy": row["policy"],
        "rules": dict(row["rules"]),
        "members": members,
        "project_id": row["project_id"],
        "user_id": row["user_id"],
    }
