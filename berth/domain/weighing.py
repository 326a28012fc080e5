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

Both the service's pick-and-claim and a scheduler on the hosts' side use this module.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

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


# --- the same over arrays, for weighing every host of a large cloud at once -------------------------


def weigh_arrays(
    ram: npt.NDArray[np.float64],
    cpus: npt.NDArray[np.float64],
    disk: npt.NDArray[np.float64],
    group_members: npt.NDArray[np.float64],
    multipliers: Multipliers,
    group_policy: SoftGroupPolicy | None = None,
    *,
    where: npt.NDArray[np.bool_] | None = None,
) -> npt.NDArray[np.float64]:
    """``weigh`` over hosts given as arrays of their facts (one entry per host, indexed alike),
    without the instances weigher; the same arithmetic, so the same weights. ``where``: only the
    hosts it marks are weighed, as if they were the only ones given; the others weigh ``-inf``."""
    columns = weighed_columns(ram, cpus, disk, group_members, multipliers, group_policy)
    return weigh_columns(columns, len(ram), where=where)[0]


WeighedColumn: TypeAlias = tuple[npt.NDArray[np.float64], float]
# A column's lowest and highest value among the hosts weighed.
Bounds: TypeAlias = tuple[float, float]


def weighed_columns(
    ram: npt.NDArray[np.float64],
    cpus: npt.NDArray[np.float64],
    disk: npt.NDArray[np.float64],
    group_members: npt.NDArray[np.float64],
    multipliers: Multipliers,
    group_policy: SoftGroupPolicy | None = None,
) -> list[WeighedColumn]:
    """The columns ``weigh_arrays`` weighs, each with its multiplier, in the order it adds them."""
    columns = [(ram, multipliers.ram), (cpus, multipliers.cpu), (disk, multipliers.disk)]
    if group_policy == "soft-affinity":
        columns.append((group_members, multipliers.soft_affinity))
    elif group_policy == "soft-anti-affinity":
        columns.append((-group_members, multipliers.soft_anti_affinity))
    return [(values, multiplier) for values, multiplier in columns if multiplier and len(values)]


def weigh_columns(
    columns: Sequence[WeighedColumn], count: int, *, where: npt.NDArray[np.bool_] | None = None
) -> tuple[npt.NDArray[np.float64], list[Bounds]]:
    """``weigh_arrays`` over ``weighed_columns``' columns (``count`` hosts), with each column's
    bounds among the hosts weighed, which ``weight_of`` needs to weigh one host as this did."""
    weights = np.zeros(count)
    bounds: list[Bounds] = []
    for values, multiplier in columns:
        if where is None:
            lowest, highest = values.min(), values.max()
        else:
            lowest, highest = values.min(where=where, initial=np.inf), values.max(where=where, initial=-np.inf)
        bounds.append((float(lowest), float(highest)))
        if highest > lowest:
            # multiplier * ((values - lowest) / (highest - lowest)), in one array instead of three.
            normalised = values - lowest
            normalised /= highest - lowest
            normalised *= multiplier
            weights += normalised
    if where is not None:
        weights[~where] = -np.inf
    return weights, bounds


def weight_of(values: Sequence[float], multipliers: Sequence[float], bounds: Sequence[Bounds]) -> float:
    """The weight ``weigh_columns`` gives a host weighed with the others, whose columns' values are
    ``values``, given the columns' multipliers and bounds: the same operations in the same order,
    so the same float."""
    weight = 0.0
    for value, multiplier, (lowest, highest) in zip(values, multipliers, bounds, strict=True):
        if highest > lowest:
            weight += (value - lowest) / (highest - lowest) * multiplier
    return weight


# From this many weights on, ``best_first_of`` works on the best of them first (``HEAD_SHARE``
# of them, found from a sample of ``_SAMPLE`` spread over the array): each run of ties costs two
# passes over the array, and a pick that tries the best 16 of 100,000 distinct weights spent
# 766 µs on them (135 µs so).
SAMPLE_FROM: Final = 4096
_SAMPLE: Final = 1024
HEAD_SHARE: Final = 8 / 1024


def best_first_of(
    weights: npt.NDArray[np.float64],
    randrange: Callable[[int, int], int] | None = None,
    epsilon: float = TIE_EPSILON,
    *,
    sample_from: int = SAMPLE_FROM,
    head_share: float = HEAD_SHARE,
) -> Iterator[int]:
    """The order of ``best_first`` as a generator over an array, each run of ties in random order
    (``randrange`` defaults to the ``random`` module's): only as much of the order is worked out as
    the caller takes, so that a pick, which usually takes the first, does not shuffle the ten
    thousand equal hosts of a fresh cloud.

    On ``sample_from`` weights or more, the runs are first drawn from the weights above a bound
    that a sample of them puts near the best ``head_share``, as long as a run cannot reach below
    the bound (every weight it holds is then among those above); the rest of the order over the
    whole array after that. The runs, their order and the draws are those of the whole array's."""
    randrange = randrange or random.randrange
    count = len(weights)
    given: list[npt.NDArray[np.intp]] = []
    sample = np.sort(weights[:: max(1, count // _SAMPLE)]) if count >= sample_from else None
    bound = float(sample[-max(1, int(len(sample) * head_share))]) if sample is not None else np.inf
    # (When the sample's best are ties of its best, so is the head's first run, which then reaches
    # below the bound: the whole array at once.)
    if sample is not None and sample[-1] - epsilon > bound:
        head = np.flatnonzero(weights > bound)
        values = weights[head]
        order = np.argsort(-values, kind="stable")
        descending = -values[order]  # ascending: the head's weights, best first, negated
        start = 0
        while start < len(order):
            top = float(values[order[start]])
            if top == -np.inf or top - epsilon <= bound:
                break
            end = int(np.searchsorted(descending, -(top - epsilon), side="right"))
            tied = np.sort(head[order[start:end]])  # in the whole array's order, as np.flatnonzero gives
            given.append(tied)
            start = end
            yield from _shuffled(tied.copy(), randrange)  # ``given`` keeps the run as found
    left = weights.astype(np.float64, copy=True)
    for tied in given:
        left[tied] = -np.inf
    while len(left):
        top = left.max()
        if top == -np.inf:
            return
        tied = np.flatnonzero(left >= top - epsilon)
        left[tied] = -np.inf
        yield from _shuffled(tied, randrange)


def _shuffled(tied: npt.NDArray[np.intp], randrange: Callable[[int, int], int]) -> Iterator[int]:
    """A Fisher-Yates shuffle of ``tied`` in place, from the front, one place at a time, as far as
    the caller goes."""
    count = len(tied)
    for place in range(count):
        other = randrange(place, count) if count - place > 1 else place
        tied[place], tied[other] = tied[other], tied[place]
        yield int(tied[place])


def first_best_of(
    weights: npt.NDArray[np.float64], randrange: Callable[[int, int], int] | None = None, epsilon: float = TIE_EPSILON
) -> int:
    """The first of ``best_first_of``'s order, with the same draw from ``randrange``, without the
    generator and the copy of the weights: a gang's dealer asks it once a member."""
    tied = np.flatnonzero(weights >= weights.max() - epsilon)
    if len(tied) == 1:
        return int(tied[0])
    return int(tied[(randrange or random.randrange)(0, len(tied))])
