"""ComputeFilter: hosts whose compute node is disabled, or whose agent is down, take no new instances.

Nova reads the compute service's disabled flag; Berth reads the trait Nova sets for it,
``COMPUTE_STATUS_DISABLED`` on the root provider. The request spec usually forbids the trait in the
candidates query already (``exclude_disabled_hosts``), and then the filter has nothing to do for it.
Nova also leaves out a service that is down; Berth, the hosts the conductors see as down
(``SchedulerConfig.hosts_down``). The service's books cannot tell a host down, so the scheduler
names their trees in the pick's ``avoid_trees``; the pick then covers this filter whenever the
query forbids the trait (without that, the Placement API's path is taken, where this filter runs).
"""

from __future__ import annotations

from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.request.request_spec import DISABLED_TRAIT


class ComputeFilter(HostFilter):
    name = "ComputeFilter"

    def applies(self, request: BuildRequest) -> bool:
        return DISABLED_TRAIT not in request.spec.root_forbidden or bool(self.config.hosts_down)

    def pick_covers(self, request: BuildRequest) -> bool:
        # The hosts down are avoided by the pick's body (``Selector`` names them).
        return DISABLED_TRAIT in request.spec.root_forbidden

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        if DISABLED_TRAIT in host.traits:
            return f"disabled ({DISABLED_TRAIT})"
        if host.name in self.config.hosts_down:
            return "down: its agent stopped beating"
        return None
