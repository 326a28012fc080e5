"""DiskWeigher: free disk (DISK_GB) of the host's tree and of the shared storage its candidates
use; a positive multiplier spreads."""

from __future__ import annotations

from berth.domain.weighing import HostFacts
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.weighers.base import HostWeigher


class DiskWeigher(HostWeigher):
    name = "DiskWeigher"
    multiplier_field = "disk"
    option = "disk_weight_multiplier"

    def raw(self, facts: HostFacts, request: BuildRequest) -> float:
        return facts.free_disk_gb
