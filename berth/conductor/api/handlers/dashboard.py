"""``GET /berth/dashboard/control``: the control plane at a glance, for the service's dashboard page
(which reads it across origins, hence ``berth conductor --cors-allowed-origin``): the operations in
flight, the last ones that failed or were rolled back, the hosts with their servers, and the totals.
Four small reads of the conductors' database; nothing of the agents or the service is asked."""

from __future__ import annotations

from typing import Any, Final

from berth.conductor.api import views
from berth.conductor.api.handlers.servers import plane_of
from berth.conductor.journal import FAILED, ROLLED_BACK, Operation
from berth.web.app import WebCall
from berth.web.responses import Reply

# The running operations listed (oldest first: the ones that may be stuck); the totals count them all.
RUNNING_SHOWN: Final = 50
# The failed and rolled-back operations listed, the latest end first.
FAILURES_SHOWN: Final = 20
_NO_CACHE: Final = {"cache-control": "no-cache"}


def control(call: WebCall) -> Reply:
    """The operations in flight and the last that failed, the hosts and the servers on each."""
    plane = plane_of(call)
    running = plane.journal.running()
    failed = plane.journal.ended((FAILED, ROLLED_BACK), FAILURES_SHOWN)
    hosts = plane.hosts.all()
    on_host = plane.servers.count_by_host()
    by_status = plane.servers.count_by_status()
    up = sum(1 for h in hosts if h.up)
    body = {
        "running": [_running(op) for op in running[:RUNNING_SHOWN]],
        "failures": [_failure(op) for op in failed],
        "hosts": [
            {
                "name": h.name,
                "zone": h.zone,
                "state": "up" if h.up else "down",
                "status": "disabled" if h.disabled else "enabled",
                "disabled_reason": h.disabled_reason,
                "servers": on_host.get(h.name, 0),
                "last_heartbeat_seconds_ago": round(h.silent_for, 1),
            }
            for h in hosts
        ],
        "totals": {
            "servers": sum(by_status.values()),
            "servers_by_status": dict(sorted(by_status.items())),
            "hosts_up": up,
            "hosts_down": len(hosts) - up,
            "hosts_disabled": sum(1 for h in hosts if h.disabled),
            "operations_running": len(running),
        },
    }
    return views.reply(body, headers=_NO_CACHE)


def _running(op: Operation) -> dict[str, Any]:
    return {
        "id": op.id,
        "kind": op.kind,
        "server_id": op.instance_uuid,
        "step": op.step or None,
        "owner": op.owner or None,
        "started": views.moment(op.created_at),
    }


def _failure(op: Operation) -> dict[str, Any]:
    return {
        "id": op.id,
        "kind": op.kind,
        "server_id": op.instance_uuid,
        "state": op.state,
        "error": op.error,
        "ended": views.moment(op.updated_at),
    }
