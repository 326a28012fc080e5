"""NUMATopologyFilter: the guest's NUMA cells (and pinned CPUs) fit the host's cells.

Placement does not know the host's NUMA cells (they carry no inventory of their own), so the
filter asks what the agent's claim would do: it runs ``berth.domain.host.snapshot.fits`` on the
agent's snapshot, with this call's earlier placements on the host counted, for the request
without its PCI devices (those are ``PciPassthroughFilter``'s). A pinned-CPU request has a
one-cell topology and is checked here too.
"""

from __future__ import annotations

import dataclasses

from berth.domain.host.snapshot import Refusal
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class NUMATopologyFilter(HostFilter):
    name = "NUMATopologyFilter"
    needs_agent = True

    def applies(self, request: BuildRequest) -> bool:
        return request.spec.host_request.numa_request is not None

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        fitted = host.fit(dataclasses.replace(request.spec.host_request, pci=()))
        if isinstance(fitted, str):
            return fitted
        if isinstance(fitted, Refusal):
            return "; ".join(fitted.reasons)
        return None
