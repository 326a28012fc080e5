"""CPUWeigher: free CPUs (VCPU and PCPU) of the host's tree; a positive multiplier spreads."""

from __future__ import annotations

from berth.domain.weighing import HostFacts
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.weighers.base import HostWeigher


class CPUWeigher(HostWeigher):
    name = "CPUWeigher"
    multiplier_field = "cpu"
    option = "cpu_weight_multiplier"

    def raw(self, facts: HostFacts, request: BuildRequest) -> float:
        return facts.free_cpus
