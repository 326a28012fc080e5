"""Where a gang's members go: how many on each tree, under the server group's hard policy and the
topology asked, with no database (``berth.store.pick.gang.transaction`` feeds it and writes what it plans).

Every member of a gang asks the same, so each tree is known by how many members it can take
(``tree_capacity``, from the room the search read) and the plan is a matter of counts:

- no topology: every tree's count, up to the gang's size;
- ``Within``: the trees of one aggregate of the set; the aggregate chosen is the one that takes the
  most members (the whole gang when one can), ties going to the one with the least room left over
  once the gang is in (a smaller gang leaves the roomier racks whole for larger ones), then to the
  one whose best tree weighs most, then to the order given;
- ``SpreadOver``: the counts over the aggregates of the set are levelled (each member goes to the
  aggregate with the fewest so far that has room, while the spread of the counts stays within
  ``max_skew``), which places the most that any placement within the skew can;
- anti-affinity: at most one member on a tree (trees holding a member already are left out by the
  caller); affinity: every member on one tree (the caller leaves only the members' trees when the
  group has some).

For identical members on trees whose capacities are exact (a tree of one provider per class, no
sharing provider), the most placed is the most any placement could: the property test of
tests/test_pick_gang.py checks it against an enumeration of every placement of small clouds.
Within the trees chosen, the members are dealt one at a time to the tree the weighers rank first
with the members dealt before counted (``Dealer``), as picks one after another would go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from berth.domain.weighing import Multipliers, SoftGroupPolicy
from berth.domain.weighing_arrays import best_first_of, first_best_of, weigh_arrays

# The most consumers one gang may name (the body's schema holds callers to it).
MAX_GANG: Final = 1000
# The most aggregates a topology may name: every rack of a cloud of 100,000 hosts, and more.
MAX_TOPOLOGY_AGGREGATES: Final = 10_000
# A pool of more trees than this has its members dealt over its best trees only (``_shortlist``):
# dealing one member weighs every tree of the pool again.
SHORTLIST_FROM: Final = 256

HardPolicy: TypeAlias = Literal["affinity", "anti-affinity"] | None
Reason: TypeAlias = Literal["room", "policy", "topology"]


@dataclass(frozen=True)
class Within:
    """Every member under one aggregate of ``aggregates`` (ids)."""

    aggregates: tuple[int, ...]


@dataclass(frozen=True)
class SpreadOver:
    """The members' counts over ``aggregates`` (ids) differ by at most ``max_skew``."""

    aggregates: tuple[int, ...]
    max_skew: int = 1


Topology: TypeAlias = Within | SpreadOver | None


class GangTree(NamedTuple):
    """A tree the gang may use: how many members it can take and which aggregates its root is in
    (a tuple: a large cloud makes ten thousand of them for each gang)."""

    root_id: int
    capacity: int
    aggregates: frozenset[int] = frozenset()


@dataclass
class Dealer:
    """The weighers' facts of the trees (arrays indexed like the planner's trees), moved on as each
    member is dealt: a member takes ``per_member`` (free RAM, CPUs, disk) off its tree and adds one
    instance and one group member to it."""

    ram: npt.NDArray[np.float64]
    cpus: npt.NDArray[np.float64]
    disk: npt.NDArray[np.float64]
    instances: npt.NDArray[np.float64]
    members: npt.NDArray[np.float64]
    # tree index -> what one member takes off its free RAM, CPUs and disk
    per_member: Sequence[tuple[float, float, float]]
    multipliers: Multipliers
    soft: SoftGroupPolicy | None = None
    randrange: Callable[[int, int], int] | None = None
    weights_dealt: list[float] = field(default_factory=list)

    def weights(self, indexes: Sequence[int] | npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """The weights of the trees at ``indexes``, normalised over them."""
        chosen = np.asarray(indexes, dtype=np.intp)
        weights = weigh_arrays(
            self.ram[chosen],
            self.cpus[chosen],
            self.disk[chosen],
            self.members[chosen],
            self.multipliers,
            self.soft,
        )
        values = self.instances[chosen]
        if self.multipliers.instances and len(values) and values.max() > values.min():
            weights += self.multipliers.instances * (values - values.min()) / (values.max() - values.min())
        return weights

    def best(self, indexes: Sequence[int]) -> tuple[int, float]:
        """The tree of ``indexes`` the weighers rank first (ties at random), and its weight."""
        weights = self.weights(indexes)
        first = first_best_of(weights, self.randrange)
        return indexes[first], float(weights[first])

    def deal(self, indexes: Sequence[int], room: dict[int, int], count: int) -> list[int]:
        """``count`` members dealt one at a time over the trees of ``indexes`` with ``room`` left,
        each to the best of them as the facts stand; the tree of each, in order."""
        trees = np.asarray(indexes, dtype=np.intp)
        left = np.array([room[index] for index in indexes], dtype=np.int64)
        dealt: list[int] = []
        for _ in range(count):
            open_ = np.flatnonzero(left > 0)
            weights = self.weights(trees[open_])
            first = first_best_of(weights, self.randrange)
            index = int(trees[open_[first]])
            left[open_[first]] -= 1
            room[index] -= 1
            self.place(index, float(weights[first]))
            dealt.append(index)
        return dealt

    def place(self, index: int, weight: float) -> None:
        ram, cpus, disk = self.per_member[index]
        self.ram[index] -= ram
        self.cpus[index] -= cpus
        self.disk[index] -= disk
        self.instances[index] += 1
        self.members[index] += 1
        self.weights_dealt.append(weight)


@dataclass(frozen=True)
class Plan:
    """The tree (index) of each member placed, in the order of the gang's consumers, and the weight
    each had when dealt."""

    trees: list[int]
    weights: list[float]


@dataclass(frozen=True)
class Shortfall:
    """The most members any placement could take, fewer than the gang's minimum, and what stopped
    the rest."""

    most: int
    reason: Reason


def most_placed(trees: Sequence[GangTree], asked: int, policy: HardPolicy, topology: Topology) -> int:
    """The most members of a gang of ``asked`` that the trees can take under the policy and the
    topology."""
    return sum(share for _, share in _shares(trees, asked, policy, topology, weights=None))


def plan_gang(
    trees: Sequence[GangTree],
    asked: int,
    min_count: int,
    policy: HardPolicy,
    topology: Topology,
    dealer: Dealer,
    *,
    without_policy: Sequence[GangTree] | None = None,
) -> Plan | Shortfall:
    """Where the members go: as many as can be placed, up to ``asked``, or a ``Shortfall`` when
    that is fewer than ``min_count``. ``without_policy``: the trees that fit before the group's
    policy left some out (for the reason of a shortfall; ``trees`` when not given)."""
    initial = dealer.weights(list(range(len(trees)))) if trees else np.zeros(0)
    shares = _shares(trees, asked, policy, topology, weights=initial)
    placed = sum(share for _, share in shares)
    if placed < min_count:
        every = without_policy if without_policy is not None else trees
        if most_placed(every, asked, None, None) < min_count:
            reason: Reason = "room"
        elif most_placed(trees, asked, policy, None) < min_count:
            reason = "policy"
        else:
            reason = "topology"
        return Shortfall(placed, reason)
    dealt_before = len(dealer.weights_dealt)
    order: list[int] = []
    for pool, share in shares:
        if policy == "affinity":
            # One tree: the best of those that take the whole share.
            index, weight = dealer.best([index for index, left in pool.items() if left >= share])
            for _ in range(share):
                dealer.place(index, weight)
            order += [index] * share
        else:
            order += dealer.deal(_shortlist(pool, share, dealer), dict(pool), share)
    return Plan(order, dealer.weights_dealt[dealt_before:])


def _shortlist(pool: Mapping[int, int], share: int, dealer: Dealer) -> list[int]:
    """The trees of ``pool`` the members are dealt over: all of them, or of a pool of more than
    ``SHORTLIST_FROM`` trees, the best by the weighers before the deal (ties in random order), as
    many as hold twice the share and number twice the share (so that spreading members still
    finds a tree of its own for each)."""
    indexes = list(pool)
    if len(indexes) <= SHORTLIST_FROM:
        return indexes
    weights = dealer.weights(indexes)
    chosen: list[int] = []
    room = 0
    for position in best_first_of(weights, dealer.randrange):
        index = indexes[position]
        chosen.append(index)
        room += pool[index]
        if len(chosen) >= 2 * share and room >= 2 * share:
            break
    return chosen


# --- how many, and from which trees -----------------------------------------------------------------

# Trees (by index, with the members each can take) and how many members to deal over them.
_Share: TypeAlias = tuple[dict[int, int], int]


def _shares(
    trees: Sequence[GangTree],
    asked: int,
    policy: HardPolicy,
    topology: Topology,
    weights: npt.NDArray[np.float64] | None,
) -> list[_Share]:
    """The pools of trees and how many members each takes, in a placement of the most members the
    policy and topology allow (under affinity, each pool's share goes to one of its trees)."""
    room = {
        index: (min(tree.capacity, 1) if policy == "anti-affinity" else tree.capacity)
        for index, tree in enumerate(trees)
    }
    room = {index: left for index, left in room.items() if left > 0}
    if isinstance(topology, Within):
        return _within(trees, room, asked, policy, topology, weights)
    if isinstance(topology, SpreadOver):
        room = {index: left for index, left in room.items() if trees[index].aggregates & set(topology.aggregates)}
        if policy == "affinity":
            # Over one aggregate only (more is refused as a contradiction before the search).
            return _one_pool(room, asked, policy)
        return _spread(trees, room, asked, topology)
    return _one_pool(room, asked, policy)


def _one_pool(room: dict[int, int], asked: int, policy: HardPolicy) -> list[_Share]:
    if not room:
        return []
    most = max(room.values()) if policy == "affinity" else sum(room.values())
    return [(room, min(asked, most))]


def _within(
    trees: Sequence[GangTree],
    room: Mapping[int, int],
    asked: int,
    policy: HardPolicy,
    topology: Within,
    weights: npt.NDArray[np.float64] | None,
) -> list[_Share]:
    """The pool of the aggregate that takes the most members; ties to the least room left over,
    then to the best tree's weight, then to the order given."""
    best: tuple[int, int, float, int] | None = None
    chosen: list[_Share] = []
    pools: dict[int, dict[int, int]] = {aggregate: {} for aggregate in topology.aggregates}
    for index, left in room.items():
        for aggregate in trees[index].aggregates:
            pool = pools.get(aggregate)
            if pool is not None:
                pool[index] = left
    for order, aggregate in enumerate(topology.aggregates):
        shares = _one_pool(pools[aggregate], asked, policy)
        if not shares:
            continue
        pool, placed = shares[0]
        leftover = (max(pool.values()) if policy == "affinity" else sum(pool.values())) - placed
        top = max(float(weights[index]) for index in pool) if weights is not None else 0.0
        key = (placed, -leftover, top, -order)
        if best is None or key > best:
            best, chosen = key, shares
    return chosen


def _home(tree: GangTree, aggregates: Sequence[int]) -> int:
    """The first aggregate of the set (in the order given) that the tree's root is in."""
    return next(aggregate for aggregate in aggregates if aggregate in tree.aggregates)


def _spread(trees: Sequence[GangTree], room: Mapping[int, int], asked: int, topology: SpreadOver) -> list[_Share]:
    """The most members, up to ``asked``, whose counts over the aggregates stay within ``max_skew``
    of each other. For a total and the smallest count ``level``, the counts can lie anywhere from
    ``level`` to ``level + max_skew`` (and the aggregate's room): a total fits when it lies between
    the sums of those bounds at the highest level it allows; the counts then go up from ``level``
    one at a time, to the aggregate with the fewest."""
    aggregates = topology.aggregates
    pools: dict[int, dict[int, int]] = {aggregate: {} for aggregate in aggregates}
    for index, left in room.items():
        pools[_home(trees[index], aggregates)][index] = left
    capacity = {aggregate: sum(pool.values()) for aggregate, pool in pools.items()}
    lowest = min(capacity.values())
    for total in range(min(asked, sum(capacity.values())), 0, -1):
        level = min(lowest, total // len(aggregates))
        top = {aggregate: min(capacity[aggregate], level + topology.max_skew) for aggregate in aggregates}
        if total > sum(top.values()):
            continue
        count = dict.fromkeys(aggregates, level)
        for _ in range(total - level * len(aggregates)):
            target = min((a for a in aggregates if count[a] < top[a]), key=lambda a: count[a])
            count[target] += 1
        return [(pools[aggregate], count[aggregate]) for aggregate in aggregates if count[aggregate]]
    return []
