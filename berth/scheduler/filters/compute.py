"""ComputeFilter: hosts whose compute node is disabled take no new instances.

Nova reads the compute service's disabled flag; Berth reads the trait Nova sets for it,
``COMPUTE_STATUS_DISABLED`` on the root provider. The request spec usually forbids the trait in the
candidates query already (``exclude_disabled_hosts``), and then the filter has nothing to do.
"""

from __future__ import annotations

from berth.scheduler.build_request import BuildRequest
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.host_state import HostState
from berth.scheduler.request_spec import DISABLED_TRAIT


class ComputeFilter(HostFilter):
    name = "ComputeFilter"

    def applies(self, request: BuildRequest) -> bool:
        return DISABLED_TRAIT not in request.spec.root_forbidden

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        if DISABLED_TRAIT in host.traits:
            return f"disabled ({DISABLED_TRAIT})"
        return None
