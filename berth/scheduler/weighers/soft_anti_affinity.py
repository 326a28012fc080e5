"""ServerGroupSoftAntiAffinityWeigher: under the ``soft-anti-affinity`` policy, the fewer members of
the group a host holds the better; other requests weigh 0 everywhere."""

from __future__ import annotations

from berth.domain.weighing import HostFacts
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.weighers.base import HostWeigher


class ServerGroupSoftAntiAffinityWeigher(HostWeigher):
    name = "ServerGroupSoftAntiAffinityWeigher"
    multiplier_field = "soft_anti_affinity"
    option = "soft_anti_affinity_weight_multiplier"

    def raw(self, facts: HostFacts, request: BuildRequest) -> float:
        return -float(facts.group_members) if request.group_policy() == "soft-anti-affinity" else 0.0
