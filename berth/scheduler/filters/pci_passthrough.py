"""PciPassthroughFilter: the flavor's PCI devices are free on the host, on the guest's NUMA cells
when their policy requires it.

Placement, asked for one request group per device, finds hosts with such devices free; which of
them the agent would hand over, and whether they sit on the cells the guest's cells land on, only
the agent's claim knows. The filter runs that claim's fitting (``fits``) on the agent's snapshot
for the whole request, so that a host it passes is one whose agent takes the instance.
"""

from __future__ import annotations

from berth.domain.host.snapshot import Refusal
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class PciPassthroughFilter(HostFilter):
    name = "PciPassthroughFilter"
    needs_agent = True

    def applies(self, request: BuildRequest) -> bool:
        return bool(request.spec.host_request.pci)

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        fitted = host.fit(request.spec.host_request)
        if isinstance(fitted, str):
            return fitted
        if isinstance(fitted, Refusal):
            return "; ".join(fitted.reasons)
        return None
