"""AvailabilityZoneFilter: the host must be in the zone the request names.

A host is in every configured zone one of whose aggregates it belongs to
(``SchedulerConfig.availability_zones``), and in the default zone when in none. When the zone asked
for has aggregates configured, the candidates query already asks for them (``member_of``) and the
filter has nothing left to do; it matters for the default zone and for zones without aggregates.
"""

from __future__ import annotations

from berth.scheduler.filters.base import HostFilter
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest


class AvailabilityZoneFilter(HostFilter):
    name = "AvailabilityZoneFilter"

    def applies(self, request: BuildRequest) -> bool:
        zone = request.spec.availability_zone
        return zone is not None and not self.config.availability_zones.get(zone)

    def aggregates_read(self) -> frozenset[str]:
        return frozenset().union(*self.config.availability_zones.values())

    def zones_of(self, host: HostState) -> set[str]:
        zones = {zone for zone, aggregates in self.config.availability_zones.items() if aggregates & host.aggregates}
        return zones or {self.settings.default_availability_zone}

    def refusal(self, host: HostState, request: BuildRequest) -> str | None:
        zone = request.spec.availability_zone
        zones = self.zones_of(host)
        if zone is None or zone in zones:
            return None
        return f"in availability zone {', '.join(sorted(zones))}, not {zone}"
