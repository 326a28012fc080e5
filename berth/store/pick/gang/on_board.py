"""A gang planned on the board (``berth.store.pick.board.host_board``) in a read before its write
transaction, which then only writes what was planned.

For a request the board weighs (``on_board``: one group of resources, perhaps with the root's
traits, no instances weigher), every tree's capacity for the gang's identical members comes from
the board's arrays: for each class asked, how many times the amount fits in the most room one of
the tree's providers has (or a sharing provider anchored to it has), the least of those over the
classes. The plan (``gang_plan.plan_gang``) is made from those capacities, and only the trees it
uses are searched (``CandidateFinder.candidates_in_trees``): their exact capacity (``tree_capacity``
over their candidates, which keep every unit constraint) and the aggregates their roots are in
replace the board's; when one of them takes fewer members than planned, or is not under the
aggregate the board put it in, the gang is planned again, at most ``MOST_PLANS`` times. The plan
only counts when it places every member: a board that is behind the books must not turn into a
refusal, or into fewer members placed, while the trees as the database holds them take more.

In the write (``claim_gang_on_board``), under the server group's lock, the group's members are read
again, and the plan holds only if they are what the read found; the members' leases, allocations
(one conditional write of the whole gang, ``replace_allocations``) and memberships are written.
When the write refuses (a concurrent writer took the room meanwhile), ``PlanOutdated`` rolls the
whole transaction back, nothing written, and the gang is planned again in a new read
(``place_gang``), whose search of the planned trees sees what the writers took. When the board's
plan does not place
every member, the board is read again first (``HostBoard.catch_up``: it may not hold yet what
the books do, such as the racks of a topology just changed) and the gang planned on it once more.
After ``PLANS_IN_A_READ`` plans, or when the board still falls short, ``pick_gang`` places the
gang as if there had been no plan: it searches every tree in its write transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Final

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from berth.domain.candidates import Candidate, ProviderData
from berth.domain.capacity import headroom
from berth.domain.errors import BadRequest, ConcurrentUpdate, Conflict
from berth.domain.weighing_arrays import weigh_arrays
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.names import resolve
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.database import Database
from berth.store.leases.ledger import set_lease
from berth.store.pick.avoided import avoided_roots, board_mask
from berth.store.pick.board.host_board import _NONE, BoardView, HostBoard, weighed_classes
from berth.store.pick.board.on_board import (
    _anchored,
    _disk_with_sharing,
    _group_mask,
    _members_on,
    _own_amounts,
    on_board,
)
from berth.store.pick.claim import new_consumer_allocations
from berth.store.pick.gang.plan import Dealer, GangTree, Plan, Shortfall, SpreadOver, Within, plan_gang
from berth.store.pick.gang.transaction import (
    MOST_PLANS,
    GangMember,
    GangPick,
    GangRequest,
    _hard_policy,
    _topology,
    check_gang_quotas,
    pick_gang,
    tree_capacity,
)
from berth.store.pick.priorities import set_priority
from berth.store.pick.request import soft_policy
from berth.store.pick.transaction import EVERY_CANDIDATE, candidates_by_root
from berth.store.placement.allocations import replace_allocations
from berth.store.server_groups import membership

# Plans on the board, each in a read of its own, before the gang searches every tree in its write.
PLANS_IN_A_READ: Final = 3


class PlanOutdated(Exception):
    """The plan no longer holds in the write: the group's members moved since the read, or a
    concurrent writer took the room.  Raised out of the write so that its transaction is rolled
    back whole: a SAVEPOINT would do the same for a write that is the transaction's only one, and
    on SQLite it costs a copy of every page the gang's rows touch (the insert of a gang of 100's
    allocations took three to four times as long in one; with the copies kept in memory instead
    of a temporary file, twice as long)."""


@dataclass(frozen=True)
class PlannedMember:
    """A member's tree (its index on the board), its root, the candidate to write and its weight."""

    index: int
    root_id: int
    candidate: Candidate
    weight: float


@dataclass(frozen=True)
class GangBoardPlan:
    """What a gang planned on the board before its write transaction."""

    view: BoardView
    # One per member placed, in the order of the gang's consumers.
    members: Sequence[PlannedMember]
    providers: Mapping[int, ProviderData]
    sharing_ids: frozenset[int]
    # The server group's members by root, as the read found them.
    group_members: Counter[int]
    class_names: Mapping[int, str]
    weighed: Mapping[int, str]
    fitted: int
    allowed: int
    # What the members took, for the board once the transaction has committed (``committed``).
    taken: list[Callable[[], None]] = field(default_factory=list)

    def committed(self) -> None:
        """As ``BoardPlan.committed``: the members' claims off the board once they are written."""
        for take in self.taken:
            take()
        self.taken.clear()


class BoardMiss(Enum):
    """Why the board made no plan."""

    NOT_WEIGHED = "the request is not one the board weighs"
    SHORT = "the board's plan does not place every member"


def plan_gang_on_board(
    conn: Connection, request: GangRequest, cache: ProviderCache, board: HostBoard
) -> GangBoardPlan | BoardMiss:
    """In a read, before the gang's write transaction: where every member goes and the candidate
    each writes; or why there is no such plan."""
    resolved = resolve(conn, request.query)
    if not on_board(resolved.request, request.multipliers):
        return BoardMiss.NOT_WEIGHED
    topology = _topology(conn, request.topology)
    board.read_if_empty(conn, cache)
    board.catch_up_if_quiet()
    view = board.use()
    if not len(view.roots):
        return BoardMiss.SHORT
    plain = resolved.request.weighable_resources
    assert plain is not None  # on_board
    asked = len(request.consumers)
    finder = CandidateFinder(conn, resolved.request, cache, limit=None, max_candidates=EVERY_CANDIDATE)
    sharing = finder.sharing
    capacity = np.full(len(view.roots), float(asked))
    for rc, amount in plain:
        times = np.floor(view.room_of(rc) / amount)
        for shared in sharing.values():
            inventory = shared.inventories.get(rc)
            if inventory is not None:
                anchored = _anchored(view, shared)
                room = headroom(inventory.total, inventory.reserved, inventory.allocation_ratio, inventory.used)
                times[anchored] = np.maximum(times[anchored], room // amount)
        capacity = np.minimum(capacity, times)
    roots_ok = view.roots_allowed(resolved.request.root_required, resolved.request.root_forbidden)
    roots_ok &= board_mask(view.roots, avoided_roots(conn, request.avoid_trees))
    fits = (capacity >= 1) & roots_ok
    group = request.server_group
    members = membership.member_hosts(conn, group, frozenset(sharing)) if group is not None else Counter[int]()
    allowed = fits & _group_mask(view, group.policy if group is not None else None, members)
    indexes = np.flatnonzero(allowed)
    if not len(indexes):
        return BoardMiss.SHORT
    weighed = weighed_classes(conn)
    disk = _disk_with_sharing(view, sharing, weighed)
    group_members = _members_on(view, members)
    policy = _hard_policy(group)
    aggregates = topology.aggregates if topology is not None else ()
    home, count_in = _homes(view, aggregates)
    disjoint = not aggregates or int(count_in[indexes].max()) <= 1
    if policy != "affinity" and disjoint:
        # Only the trees the plan needs: the best of the pool (of each aggregate spread over), or the
        # aggregates a gang within one would choose first.
        weights = weigh_arrays(
            view.ram[indexes],
            view.cpus[indexes],
            disk[indexes],
            group_members[indexes],
            request.multipliers,
            soft_policy(group),
        )
        counts = np.minimum(capacity[indexes], 1.0) if policy == "anti-affinity" else capacity[indexes]
        if isinstance(topology, Within):
            # (The trees' aggregates below are still those of the whole set.)
            indexes, topology = _first_aggregates(indexes, counts, weights, home[indexes], topology, asked)
        else:
            extra = topology.max_skew if isinstance(topology, SpreadOver) else 0
            indexes = _best(indexes, counts, weights, home[indexes] if aggregates else None, 2 * asked + extra)
    topology_set = frozenset(aggregates)
    alone = [frozenset({aggregate}) for aggregate in aggregates]
    nowhere = frozenset[int]()
    roots: list[int] = view.roots[indexes].tolist()
    trees = [
        GangTree(
            root,
            count,
            nowhere if inside == 0 else alone[first] if inside == 1 else _under(view, aggregates, index),
        )
        for root, count, index, first, inside in zip(
            roots,
            capacity[indexes].astype(np.int64).tolist(),
            indexes.tolist(),
            home[indexes].tolist(),
            count_in[indexes].tolist(),
            strict=True,
        )
    ]
    class_names = {rc: name for name, rc in resolved.class_ids.items()}
    amounts = {class_names[rc]: float(amount) for rc, amount in plain}
    # What a member takes off its tree's free RAM, CPUs and disk, its disk on the host (the weights
    # the dealer moves on with; the write takes what the candidate says).
    per_member = (
        amounts.get("MEMORY_MB", 0.0),
        amounts.get("VCPU", 0.0) + amounts.get("PCPU", 0.0),
        amounts.get("DISK_GB", 0.0),
    )
    disk = disk[indexes]
    group_members = group_members[indexes]
    sharing_ids = frozenset(sharing)
    by_root: dict[int, list[Candidate]] = {}
    for _ in range(MOST_PLANS):
        dealer = Dealer(
            ram=view.ram[indexes].copy(),
            cpus=view.cpus[indexes].copy(),
            disk=disk.copy(),
            instances=np.zeros(len(indexes)),
            members=group_members.copy(),
            per_member=[per_member] * len(indexes),
            multipliers=request.multipliers,
            soft=soft_policy(group),
        )
        plan = plan_gang(trees, asked, asked, policy, topology, dealer)
        if isinstance(plan, Shortfall):
            return BoardMiss.SHORT
        used = sorted(set(plan.trees))
        unsearched = [roots[index] for index in used if roots[index] not in by_root]
        if unsearched:
            found = finder.candidates_in_trees(unsearched)
            by_root.update(dict.fromkeys(unsearched, []))
            by_root.update(candidates_by_root(found, finder.providers, sharing_ids))
        if not _settled(plan, used, trees, roots, by_root, finder.providers, topology_set, asked):
            continue
        chosen = _members(plan, roots, [int(index) for index in indexes], by_root, finder.providers)
        if isinstance(chosen, tuple):
            # A sharing provider counted whole for each tree anchored to it ran out: the tree
            # counted at what it took, as the write would find it.
            index, took = chosen
            trees[index] = trees[index]._replace(capacity=took)
            continue
        return GangBoardPlan(
            view,
            chosen,
            finder.providers,
            sharing_ids,
            members,
            class_names,
            weighed,
            int(fits.sum()),
            len(indexes),
        )
    return BoardMiss.SHORT


def _homes(view: BoardView, aggregates: Sequence[int]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """For every tree on the board, the position in ``aggregates`` of the first it is in (-1: none),
    and how many of them it is in."""
    home = np.full(len(view.roots), -1, dtype=np.intp)
    count_in = np.zeros(len(view.roots), dtype=np.intp)
    for position in reversed(range(len(aggregates))):
        under = view.by_aggregate.get(aggregates[position])
        if under is not None:
            home[under] = position
            count_in[under] += 1
    return home, count_in


def _under(view: BoardView, aggregates: Sequence[int], index: int) -> frozenset[int]:
    """The aggregates of ``aggregates`` a tree in several of them is in."""
    return frozenset(a for a in aggregates if index in view.by_aggregate.get(a, _NONE))


def _best(
    indexes: npt.NDArray[np.intp],
    counts: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    home: npt.NDArray[np.intp] | None,
    need: int,
) -> npt.NDArray[np.intp]:
    """The trees of ``indexes`` the plan is made over: of each aggregate (``home``, or all of them
    as one pool), the best by ``weights`` (ties in random order), as many as take ``need`` members
    (``counts``) and number ``need``, or all of them when they take fewer. A plan over them places
    as many as one over all of them: the planner counts an aggregate's room only up to the gang's
    size (and ``max_skew`` above its level), which ``need`` covers."""
    groups = [np.arange(len(indexes))] if home is None else [np.flatnonzero(home == g) for g in np.unique(home)]
    kept = []
    for group in groups:
        shuffled = group[np.random.permutation(len(group))]
        ranked = shuffled[np.argsort(-weights[shuffled], kind="stable")]
        enough = int(np.searchsorted(np.cumsum(counts[ranked]), need)) + 1
        kept.append(ranked[: max(enough, need)])
    return np.sort(indexes[np.concatenate(kept)])


# Aggregates a gang within one of them is planned over: the one the planner chooses first, and the
# next ones for when a tree of it takes fewer members than the board counted.
WITHIN_AGGREGATES: Final = 4


def _first_aggregates(
    indexes: npt.NDArray[np.intp],
    counts: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64],
    home: npt.NDArray[np.intp],
    topology: Within,
    asked: int,
) -> tuple[npt.NDArray[np.intp], Within]:
    """The trees of the ``WITHIN_AGGREGATES`` aggregates of ``topology`` (disjoint, ``home`` the
    position of each tree's) that ``gang_plan``'s choice ranks first, and those aggregates in the
    order given: the most members placed, then the least room left over, then the best tree's
    weight, then the order given, worked out in arrays over every tree."""
    inside = home >= 0
    indexes, counts, weights, home = indexes[inside], counts[inside], weights[inside], home[inside]
    size = len(topology.aggregates)
    room = np.bincount(home, weights=counts, minlength=size)
    placed = np.minimum(room, asked)
    top = np.full(size, -np.inf)
    np.maximum.at(top, home, weights)
    order = np.arange(size)
    ranked = np.lexsort((order, -top, room - placed, -placed))
    chosen = np.sort(ranked[placed[ranked] > 0][:WITHIN_AGGREGATES])
    keep = np.isin(home, chosen)
    return np.sort(indexes[keep]), Within(tuple(topology.aggregates[int(position)] for position in chosen))


def _settled(
    plan: Plan,
    used: Sequence[int],
    trees: list[GangTree],
    roots: Sequence[int],
    by_root: Mapping[int, Sequence[Candidate]],
    providers: Mapping[int, ProviderData],
    topology_set: frozenset[int],
    asked: int,
) -> bool:
    """Whether every tree the plan uses takes the members planned on it and is under the aggregates
    the board put it in; the trees that do not are given their searched capacity and aggregates."""
    planned = Counter(plan.trees)
    settled = True
    for index in used:
        root = roots[index]
        exact = tree_capacity(by_root[root], providers, asked)
        aggregates = providers[root].aggregates & topology_set if root in providers else frozenset[int]()
        if exact < planned[index] or aggregates != trees[index].aggregates:
            trees[index] = GangTree(root, min(exact, trees[index].capacity), aggregates)
            settled = False
    return settled


def _members(
    plan: Plan,
    roots: Sequence[int],
    indexes: Sequence[int],
    by_root: Mapping[int, Sequence[Candidate]],
    providers: Mapping[int, ProviderData],
) -> list[PlannedMember] | tuple[int, int]:
    """Each member's candidate: a tree's candidates filled first to last, as ``tree_capacity``
    counts them, with what every member before took counted; or the first tree (its index) that
    runs out of candidates, and how many members it took."""
    taken: Counter[tuple[int, int]] = Counter()
    start: Counter[int] = Counter()
    took: Counter[int] = Counter()
    chosen: list[PlannedMember] = []
    for index, weight in zip(plan.trees, plan.weights, strict=True):
        root = roots[index]
        found = by_root[root]
        while True:
            if start[root] >= len(found):
                return index, took[index]
            candidate = found[start[root]]
            fits = all(
                providers[pid].inventories[rc].free - taken[(pid, rc)] >= amount
                for pid, by_rc in candidate.allocations.items()
                for rc, amount in by_rc.items()
                if amount > 0
            )
            if fits:
                break
            start[root] += 1
        took[index] += 1
        for pid, by_rc in candidate.allocations.items():
            for rc, amount in by_rc.items():
                taken[(pid, rc)] += amount
        chosen.append(PlannedMember(int(indexes[index]), root, candidate, weight))
    return chosen


def claim_gang_on_board(conn: Connection, request: GangRequest, plan: GangBoardPlan) -> GangPick:
    """In the gang's write transaction: the plan written; ``PlanOutdated`` (the transaction to be
    rolled back) when the group's members moved since the read or the conditional write refuses."""
    group = request.server_group
    if group is not None:
        membership.lock_group(conn, group.uuid, group.policy)
        if membership.member_hosts(conn, group, plan.sharing_ids) != plan.group_members:
            raise PlanOutdated("the group's members moved")
    providers, class_names = plan.providers, plan.class_names
    placed = list(zip(request.consumers, plan.members, strict=False))
    written = [
        (
            consumer,
            member,
            {
                providers[pid].uuid: {class_names[rc]: amount for rc, amount in by_rc.items()}
                for pid, by_rc in member.candidate.allocations.items()
            },
        )
        for consumer, member in placed
    ]
    try:
        if request.lease_seconds is not None:
            # Before the allocations: a lease's row is locked before its consumer's.
            for consumer, _, _ in written:
                set_lease(conn, consumer.uuid, request.lease_seconds)
        replace_allocations(
            conn,
            [new_consumer_allocations(consumer, allocations) for consumer, _, allocations in written],
            provider_ids={providers[pid].uuid: pid for _, member, _ in written for pid in member.candidate.allocations},
            new_consumers=True,
        )
        for consumer, _, _ in written:
            set_priority(conn, consumer.uuid, request.priority)
        if group is not None:
            membership.add_members(
                conn, group.uuid, [(consumer.uuid, member.root_id) for consumer, member, _ in written]
            )
    except ConcurrentUpdate:
        raise  # a consumer exists already: the gang is refused however it is placed
    except (Conflict, BadRequest) as refused:
        # The room taken meanwhile, or a provider deleted since the read.
        raise PlanOutdated(str(refused)) from refused
    # Not a plan's refusal: a gang over its quota is refused, not planned again.
    check_gang_quotas(conn, request, [consumer.uuid for consumer, _, _ in written])
    sharing, weighed = plan.sharing_ids, plan.weighed
    plan.taken[:] = [
        partial(plan.view.take, member.index, _own_amounts(member.candidate.allocations, sharing), weighed)
        for _, member, _ in written
    ]
    return GangPick(
        tuple(
            GangMember(
                consumer.uuid,
                allocations,
                {s: [providers[pid].uuid for pid in ids] for s, ids in member.candidate.mappings.items()},
                providers[member.root_id].uuid,
                member.weight,
            )
            for consumer, member, allocations in written
        ),
        (),
        len(request.consumers),
        plan.fitted,
        plan.allowed,
    )


def place_gang(db: Database, request: GangRequest, cache: ProviderCache, board: HostBoard) -> GangPick:
    """The gang placed: planned on the board in a read (on SQLite the write transaction holds every
    writer back) and written in a write of its own, planned again from a new read when concurrent
    writers took the room meanwhile, at most ``PLANS_IN_A_READ`` times in all; when the board does
    not place every member, once more after the board is read again; then, or when the board still
    falls short, by ``pick_gang``, which searches every tree in its write."""
    caught_up = False
    for _ in range(PLANS_IN_A_READ):
        plan = db.read(lambda conn: plan_gang_on_board(conn, request, cache, board))
        if plan is BoardMiss.SHORT and not caught_up:
            # The board may be behind the books (a topology just changed: the racks a gang
            # ``within`` names are not on it yet). Read it now, outside any write, and plan again:
            # the search of every tree below holds every writer back on SQLite (0.4-0.9 s at
            # 10,000 hosts).
            db.read(lambda conn: board.catch_up(conn, cache))
            caught_up = True
            continue
        if isinstance(plan, BoardMiss):
            break
        try:
            placed = db.write(partial(claim_gang_on_board, request=request, plan=plan))
        except PlanOutdated:
            continue
        plan.committed()
        return placed
    return db.write(lambda conn: pick_gang(conn, request, cache))
