"""The scheduler's weighers, one per module, and the list of those the settings enable.

base.py                 HostWeigher: a raw value per host and a multiplier (aggregates may override it)
ram.py                  RAMWeigher: free memory
cpu.py                  CPUWeigher: free VCPU and PCPU
disk.py                 DiskWeigher: free disk, shared storage included
num_instances.py        NumInstancesWeigher: instances on the host
soft_affinity.py        ServerGroupSoftAffinityWeigher: members of a soft-affinity group
soft_anti_affinity.py   ServerGroupSoftAntiAffinityWeigher: members of a soft-anti-affinity group
ranking.py              rank: normalise, multiply, add up, best first
"""

from __future__ import annotations

from typing import Final

from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers.base import HostWeigher
from berth.scheduler.weighers.cpu import CPUWeigher
from berth.scheduler.weighers.disk import DiskWeigher
from berth.scheduler.weighers.num_instances import NumInstancesWeigher
from berth.scheduler.weighers.ram import RAMWeigher
from berth.scheduler.weighers.soft_affinity import ServerGroupSoftAffinityWeigher
from berth.scheduler.weighers.soft_anti_affinity import ServerGroupSoftAntiAffinityWeigher

WEIGHERS: Final[dict[str, type[HostWeigher]]] = {
    cls.name: cls
    for cls in (
        RAMWeigher,
        CPUWeigher,
        DiskWeigher,
        NumInstancesWeigher,
        ServerGroupSoftAffinityWeigher,
        ServerGroupSoftAntiAffinityWeigher,
    )
}


def enabled_weighers(settings: SelectionSettings) -> list[HostWeigher]:
    return [WEIGHERS[name]() for name in settings.weighers]


def counts_instances(weighers: list[HostWeigher], settings: SelectionSettings) -> bool:
    """Whether a weigher reads the instances on each host (worth reading them from Placement)."""
    instance_weighers = [w for w in weighers if isinstance(w, NumInstancesWeigher)]
    if not instance_weighers:
        return False
    weigher = instance_weighers[0]
    overridden = any(weigher.option in metadata for metadata in settings.aggregate_metadata.values())
    return overridden or bool(weigher.configured(settings.base_multipliers))
