"""ServerGroupSoftAffinityWeigher: under the ``soft-affinity`` policy, the more members of the group
a host holds the better; other requests weigh 0 everywhere."""

from __future__ import annotations

from berth.domain.weighing import HostFacts
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.weighers.base import HostWeigher


class ServerGroupSoftAffinityWeigher(HostWeigher):
    name = "ServerGroupSoftAffinityWeigher"
    multiplier_field = "soft_affinity"
    option = "soft_affinity_weight_multiplier"

    def raw(self, facts: HostFacts, request: BuildRequest) -> float:
        return facts.group_members if request.group_policy() == "soft-affinity" else 0.0
