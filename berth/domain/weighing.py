"""Weighing hosts as Nova's filter scheduler weighs them, from what the books hold.

Only the weighers whose inputs the service itself knows are here: free RAM, free CPUs (VCPU and
PCPU together), free disk, the number of instances on the host, and the members of the request's
server group on it (the soft affinity and soft anti-affinity weighers). Each weigher's raw values
are normalised over the hosts weighed together, to 0 for the lowest and 1 for the highest (0 for
all when they are equal), multiplied by the weigher's multiplier and added up: a multiplier
therefore means what the same option means to Nova. A positive RAM, CPU or disk multiplier
prefers the host with more free (spreading), a negative one the host with less (packing); a
positive instances multiplier prefers busier hosts.

Free amounts are counted as Nova's compute nodes report them: reserved units are used, and only
CPUs are multiplied by their allocation ratio (RAM and disk are weighed by their physical free
amount). A host counts the inventories of every provider of its tree, and the whole free disk of
every sharing provider anchored to it, as each of the hosts on one shared storage reports the
storage's free space as its own.

Both the service's pick-and-claim and a scheduler on the hosts' side use this module; the same
weighing over arrays, for every host of a large cloud at once, is ``berth.domain.weighing_arrays``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from berth.domain.capacity import Inventory

WeighPolicy: TypeAlias = Literal["spread", "pack"]
# The server group policies that weigh hosts rather than filter them.
SoftGroupPolicy: TypeAlias = Literal["soft-affinity", "soft-anti-affinity"]

# Hosts whose weights differ by no more than this are equally good: the choice among them is random,
# so that schedulers asking at the same moment do not all take the same host.
TIE_EPSILON: Final = 1e-9

_CPU_CLASSES: Final = frozenset({"VCPU", "PCPU"})
_RAM_CLASS: Final = "MEMORY_MB"
_DISK_CLASS: Final = "DISK_GB"


@dataclass(frozen=True)
class HostFacts:
    """What the weighers read of one host."""

    free_ram_mb: float = 0.0
    free_cpus: float = 0.0
    free_disk_gb: float = 0.0
    instances: int = 0
    # Members of the request's server group on this host.
    group_members: int = 0


@dataclass(frozen=True)
class Multipliers:
    """Each weigher's multiplier, under the name of Nova's ``*_weight_multiplier`` option; the
    defaults are Nova's."""

    ram: float = 1.0
    cpu: float = 1.0
    disk: float = 1.0
    instances: float = 0.0
    soft_affinity: float = 1.0
    soft_anti_affinity: float = 1.0


MULTIPLIER_NAMES: Final = tuple(field.name for field in dataclasses.fields(Multipliers))

# What each policy starts from: spread is Nova's defaults; pack turns the resource weighers round.
POLICY_MULTIPLIERS: Final[Mapping[WeighPolicy, Multipliers]] = {
    "spread": Multipliers(),
    "pack": Multipliers(ram=-1.0, cpu=-1.0, disk=-1.0),
}


def multipliers_for(policy: WeighPolicy, overrides: Mapping[str, float] | None = None) -> Multipliers:
    """The policy's multipliers, with those named in ``overrides`` taken as given."""
    unknown = sorted(set(overrides or {}) - set(MULTIPLIER_NAMES))
    if unknown:
        raise ValueError(f"unknown multipliers: {', '.join(unknown)}")
    return dataclasses.replace(POLICY_MULTIPLIERS[policy], **(overrides or {}))


def free_amount(resource_class: str, inventory: Inventory, used: int) -> float:
    """What one inventory adds to its host's free amount of its kind, as Nova counts it.

    Not the capacity rule's headroom (``berth.domain.capacity.headroom``), on purpose: Nova's
    weighers rank by what its compute nodes report, where reserved units are used and only CPUs are
    over-committed, so that the weights order hosts as Nova's would (tests/test_weighing.py)."""
    if resource_class in _CPU_CLASSES:
        return inventory.total * inventory.allocation_ratio - inventory.reserved - used
    return float(inventory.total - inventory.reserved - used)


def host_facts(
    inventories: Iterable[tuple[str, Inventory, int]], *, instances: int = 0, group_members: int = 0
) -> HostFacts:
    """A host's facts from ``(class name, inventory, used)`` of every inventory it counts: those of
    its tree's providers and those of the sharing providers whose disk it sees."""
    ram = cpus = disk = 0.0
    for resource_class, inventory, used in inventories:
        if resource_class == _RAM_CLASS:
            ram += free_amount(resource_class, inventory, used)
        elif resource_class in _CPU_CLASSES:
            cpus += free_amount(resource_class, inventory, used)
        elif resource_class == _DISK_CLASS:
            disk += free_amount(resource_class, inventory, used)
    return HostFacts(ram, cpus, disk, instances, group_members)


def normalise(values: Sequence[float]) -> list[float]:
    """Each value's place between the lowest (0) and the highest (1); all 0 when they are equal."""
    if not values:
        return []
    lowest, highest = min(values), max(values)
    if lowest == highest:
        return [0.0] * len(values)
    span = highest - lowest
    return [(value - lowest) / span for value in values]


_Weigher: TypeAlias = tuple[Callable[[HostFacts], float], float]


def _weighers(multipliers: Multipliers, group_policy: SoftGroupPolicy | None) -> list[_Weigher]:
    weighers: list[_Weigher] = [
        (lambda host: host.free_ram_mb, multipliers.ram),
        (lambda host: host.free_cpus, multipliers.cpu),
        (lambda host: host.free_disk_gb, multipliers.disk),
        (lambda host: host.instances, multipliers.instances),
    ]
    if group_policy == "soft-affinity":
        weighers.append((lambda host: host.group_members, multipliers.soft_affinity))
    elif group_policy == "soft-anti-affinity":
        weighers.append((lambda host: -host.group_members, multipliers.soft_anti_affinity))
    return weighers


def weigh(
    hosts: Sequence[HostFacts], multipliers: Multipliers, group_policy: SoftGroupPolicy | None = None
) -> list[float]:
    """The weight of each host, higher is better: the sum over the weighers of the multiplier times
    the normalised raw value."""
    weights = [0.0] * len(hosts)
    for raw, multiplier in _weighers(multipliers, group_policy):
        if not multiplier:
            continue
        for index, value in enumerate(normalise([raw(host) for host in hosts])):
            weights[index] += multiplier * value
    return weights


def best_first(
    weights: Sequence[float], shuffle: Callable[[list[int]], None] | None = None, epsilon: float = TIE_EPSILON
) -> list[int]:
    """The indexes of ``weights``, highest weight first; within each run of weights no further than
    ``epsilon`` below the run's first, in random order.

    ``shuffle`` defaults to the ``random`` module's, whose generator Python seeds again in every
    forked process: server workers forked from one parent must not all break ties the same way.
    """
    shuffle = shuffle or random.shuffle
    order = sorted(range(len(weights)), key=lambda index: -weights[index])
    ranked: list[int] = []
    start = 0
    while start < len(order):
        top = weights[order[start]]
        end = start + 1
        while end < len(order) and top - weights[order[end]] <= epsilon:
            end += 1
        tied = order[start:end]
        if len(tied) > 1:
            shuffle(tied)
        ranked.extend(tied)
        start = end
    return ranked
