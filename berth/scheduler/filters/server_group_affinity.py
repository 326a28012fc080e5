"""ServerGroupAffinityFilter: under the hard ``affinity`` policy, once a member of the group is on a
host, every other member goes to that host."""

from __future__ import annotations

from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class ServerGroupAffinityFilter(HostFilter):
    name = "ServerGroupAffinityFilter"

    def applies(self, request: BuildRequest) -> bool:
        return request.group_policy() == "affinity"

    def pick_covers(self, request: BuildRequest) -> bool:
        return True

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        if not request.group_hosts or host.uuid in request.group_hosts:
            return None
        assert request.group is not None  # applies() saw the group
        return f"the members of affinity group {request.group.uuid} are on another host"
