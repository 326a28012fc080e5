"""NumInstancesWeigher: the number of instances (consumers) on the host; a positive multiplier
prefers busy hosts, a negative one idle hosts, and the default 0 leaves it out (the instances are
then not even counted)."""

from __future__ import annotations

from berth.domain.weighing import HostFacts
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.weighers.base import HostWeigher


class NumInstancesWeigher(HostWeigher):
    name = "NumInstancesWeigher"
    multiplier_field = "instances"
    option = "num_instances_weight_multiplier"

    def raw(self, facts: HostFacts, request: BuildRequest) -> float:
        return facts.instances
