"""``berth.domain.weighing`` over arrays: every host of a large cloud weighed at once (the service's
host board), with the same arithmetic in the same order, so the same weights as host by host.

Apart from the pure weighing so that what needs only that (a conductor's scheduler) does not load
numpy.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

from berth.domain.weighing import TIE_EPSILON, Multipliers, SoftGroupPolicy

__all__ = [
    "HEAD_SHARE",
    "SAMPLE_FROM",
    "Bounds",
    "WeighedColumn",
    "best_first_of",
    "first_best_of",
    "weigh_arrays",
    "weigh_columns",
    "weighed_columns",
    "weight_of",
]


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
