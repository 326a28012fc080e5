"""The scheduler's filters, one per module, and the list of those the settings enable.

base.py                         HostFilter: refusal(host, request) -> reason | None, host_passes
compute.py                      ComputeFilter: not disabled (COMPUTE_STATUS_DISABLED)
availability_zone.py            AvailabilityZoneFilter: in the zone asked for
aggregate_extra_specs.py        AggregateInstanceExtraSpecsFilter: the flavor's scoped specs
                                against the host's aggregates' metadata (spec_match.py)
isolated_hosts.py               IsolatedHostsFilter: isolated images on isolated hosts
server_group_anti_affinity.py   ServerGroupAntiAffinityFilter: hard anti-affinity
server_group_affinity.py        ServerGroupAffinityFilter: hard affinity
numa_topology.py                NUMATopologyFilter: the agent's claim fits the NUMA cells
pci_passthrough.py              PciPassthroughFilter: the agent's claim finds the devices
"""

from __future__ import annotations

from typing import Final

from berth.scheduler.filters.aggregate_extra_specs import AggregateInstanceExtraSpecsFilter
from berth.scheduler.filters.availability_zone import AvailabilityZoneFilter
from berth.scheduler.filters.base import HostFilter
from berth.scheduler.filters.compute import ComputeFilter
from berth.scheduler.filters.isolated_hosts import IsolatedHostsFilter
from berth.scheduler.filters.numa_topology import NUMATopologyFilter
from berth.scheduler.filters.pci_passthrough import PciPassthroughFilter
from berth.scheduler.filters.server_group_affinity import ServerGroupAffinityFilter
from berth.scheduler.filters.server_group_anti_affinity import ServerGroupAntiAffinityFilter
from berth.scheduler.request.flavor import SchedulerConfig
from berth.scheduler.settings import SelectionSettings

FILTERS: Final[dict[str, type[HostFilter]]] = {
    cls.name: cls
    for cls in (
        ComputeFilter,
        AvailabilityZoneFilter,
        AggregateInstanceExtraSpecsFilter,
        IsolatedHostsFilter,
        ServerGroupAntiAffinityFilter,
        ServerGroupAffinityFilter,
        NUMATopologyFilter,
        PciPassthroughFilter,
    )
}


def enabled_filters(settings: SelectionSettings, config: SchedulerConfig) -> list[HostFilter]:
    """The filters the settings enable, in their order."""
    return [FILTERS[name](settings, config) for name in settings.enabled_filters]
