"""ServerGroupAntiAffinityFilter: under the hard ``anti-affinity`` policy, a host holds at most
``max_server_per_host`` members of the group (one, unless the group's rule says more)."""

from __future__ import annotations

from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class ServerGroupAntiAffinityFilter(HostFilter):
    name = "ServerGroupAntiAffinityFilter"

    def applies(self, request: BuildRequest) -> bool:
        return request.group_policy() == "anti-affinity"

    def pick_covers(self, request: BuildRequest) -> bool:
        # The service's pick keeps one member per host; a larger rule is the scheduler's to apply.
        return request.group is not None and request.group.max_server_per_host == 1

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        group = request.group
        assert group is not None  # applies() saw the group
        if len(host.group_members) < group.max_server_per_host:
            return None
        held = len(host.group_members)
        return (
            f"holds {held} member{'s' if held > 1 else ''} of anti-affinity group {group.uuid} "
            f"(at most {group.max_server_per_host})"
        )
