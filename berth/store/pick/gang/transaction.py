"""A gang pick: many consumers asking the same, placed all (or at least ``min_count``) or none, in one
write transaction.

A gang whose query the host board weighs is planned on the board in a read first, and its write
only writes that plan (``berth.store.pick.gang.on_board``); what follows is how a gang is placed
otherwise, or when that plan does not place every member or is overtaken by concurrent writers.

The steps, all inside the caller's write transaction (``Database.write``):

1. lock the server group, if one is named, as a single pick does (``membership.lock_group``): the
   picks and gangs of one group run one after another;
2. search every tree as ``GET /allocation_candidates`` does, without its limit, and drop the trees
   the group's hard policy forbids (``transaction.allowed_by_group``);
3. work out how many members each tree can take (``tree_capacity``: its candidates filled first
   to last with the room the search read) and plan the gang (``gang_plan.plan_gang``): how many
   on which trees, under the policy and the topology, dealt in the weighers' order;
4. write the plan inside a SAVEPOINT: each placed member's lease (before its allocations, in the
   lock order ``berth.store.leases.ledger`` gives), its allocations through the conditional write
   (``claim.claim_tree``), its membership. When a tree refuses a member the plan counted on (a
   concurrent writer took the room, on PostgreSQL, or a sharing provider other trees drew on
   too), the SAVEPOINT is rolled back, the tree's count lowered to what it took, and the gang
   planned again;
5. a gang that cannot place ``min_count`` raises: the caller's transaction rolls back, and nothing
   of it (allocation, membership, lease) is written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection

from berth.domain import error_codes
from berth.domain.candidate_query import CandidateQuery
from berth.domain.candidates import Candidate, ProviderData
from berth.domain.errors import BadRequest, ConcurrentUpdate, Conflict
from berth.domain.weighing import Multipliers
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.names import ResolvedQuery, resolve
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.leases.ledger import set_lease
from berth.store.pick.avoided import avoided_roots, without_avoided
from berth.store.pick.claim import Claimed, claim_tree
from berth.store.pick.gang.plan import (
    Dealer,
    GangTree,
    HardPolicy,
    Plan,
    Shortfall,
    SpreadOver,
    Within,
    plan_gang,
)
from berth.store.pick.gang.preemption import place_preempting
from berth.store.pick.host_facts import host_facts_of
from berth.store.pick.priorities import set_priority
from berth.store.pick.quota_check import check_claimed_quotas
from berth.store.pick.request import Consumer, Pick, Preempted, soft_policy
from berth.store.pick.transaction import (
    EVERY_CANDIDATE,
    allowed_by_group,
    avoided_refusal,
    candidates_by_root,
    nothing_fits,
)
from berth.store.placement.aggregates import aggregate_ids
from berth.store.rawsql import fetch
from berth.store.server_groups import membership
from berth.store.server_groups.membership import ServerGroup

# Plans made again after a tree refused a member the plan counted on, before the gang gives up.
MOST_PLANS = 16

_REASONS = {
    "room": "no room: the trees that fit the query cannot take more",
    "policy": "the {policy} policy of server group {group}",
    "topology": "the topology asked",
}


@dataclass(frozen=True)
class WithinUuids:
    aggregates: tuple[str, ...]


@dataclass(frozen=True)
class SpreadOverUuids:
    aggregates: tuple[str, ...]
    max_skew: int = 1


@dataclass(frozen=True)
class GangRequest:
    """Consumers that ask the same ``query``; at least ``min_count`` of them placed, or none."""

    query: CandidateQuery
    multipliers: Multipliers
    consumers: tuple[Consumer, ...]
    min_count: int
    topology: WithinUuids | SpreadOverUuids | None = None
    server_group: ServerGroup | None = None
    lease_seconds: float | None = None
    # Kept with each member placed (``berth.store.pick.priorities``).
    priority: int = 0
    # Members the cloud cannot take as it stands are placed by preempting consumers of lower
    # priority, for the whole gang or not at all (``berth.store.pick.gang.preemption``).
    preempt: bool = False
    # Uuids of trees neither chosen nor made room on (``berth.store.pick.avoided``).
    avoid_trees: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GangMember:
    consumer_uuid: str
    # provider uuid -> resource class -> amount
    allocations: dict[str, dict[str, int]]
    # request group suffix -> provider uuids
    mappings: dict[str, list[str]]
    root_provider_uuid: str
    weight: float


@dataclass(frozen=True)
class GangPick:
    """The members placed, in the order the consumers were given, and the consumers left out."""

    members: tuple[GangMember, ...]
    not_placed: tuple[str, ...]
    asked: int
    trees_fitted: int
    trees_weighed: int
    # The consumers removed to make room, when the gang preempted.
    preempted: tuple[Preempted, ...] = ()


class _Refused(Exception):
    """A tree took fewer members than the plan counted on: the attempt is rolled back."""

    def __init__(self, index: int, took: int):
        super().__init__(index, took)
        self.index = index
        self.took = took


def pick_gang(conn: Connection, request: GangRequest, cache: ProviderCache) -> GangPick:
    """Place the gang, or raise (409 ``berth.pick.gang_no_valid_host``) writing nothing."""
    group = request.server_group
    if group is not None:
        membership.lock_group(conn, group.uuid, group.policy)
    resolved = resolve(conn, request.query)
    topology = _topology(conn, request.topology)
    finder = CandidateFinder(conn, resolved.request, cache, limit=None, max_candidates=EVERY_CANDIDATE)
    candidates, providers = finder.find()
    sharing = frozenset(finder.sharing)
    fitting_trees = candidates_by_root(candidates, providers, sharing)
    by_root = without_avoided(fitting_trees, avoided_roots(conn, request.avoid_trees))
    members = membership.member_hosts(conn, group, sharing) if group is not None else Counter[int]()
    allowed = allowed_by_group(by_root, group, members)
    asked = len(request.consumers)
    policy = _hard_policy(group)
    topology_set = frozenset(topology.aggregates) if topology is not None else frozenset()
    roots = list(allowed)

    def gang_tree(root: int, capacity: int | None = None) -> GangTree:
        found = by_root[root]
        return GangTree(
            root,
            tree_capacity(found, providers, asked) if capacity is None else capacity,
            providers[root].aggregates & topology_set,
        )

    trees = [gang_tree(root) for root in roots]
    every = [gang_tree(root) for root in by_root] if len(by_root) != len(roots) else trees
    facts = host_facts_of(
        conn, roots, providers, finder.sharing_by_aggregate, members, bool(request.multipliers.instances)
    )
    class_names = {rc: name for name, rc in resolved.class_ids.items()}
    for _ in range(MOST_PLANS):
        dealer = Dealer(
            ram=np.array([f.free_ram_mb for f in facts], dtype=np.float64),
            cpus=np.array([f.free_cpus for f in facts], dtype=np.float64),
            disk=np.array([f.free_disk_gb for f in facts], dtype=np.float64),
            instances=np.array([f.instances for f in facts], dtype=np.float64),
            members=np.array([f.group_members for f in facts], dtype=np.float64),
            per_member=[_per_member(by_root[root][0], sharing, class_names) for root in roots],
            multipliers=request.multipliers,
            soft=soft_policy(group),
        )
        plan = plan_gang(trees, asked, request.min_count, policy, topology, dealer, without_policy=every)
        if isinstance(plan, Shortfall) and request.preempt:
            # The members that fit as the cloud stands, then a preemption for each of the others.
            fitting = plan_gang(trees, asked, 0, policy, topology, dealer, without_policy=every)
            assert isinstance(fitting, Plan)  # nothing to fall short of

            fitted: list[GangMember] = []

            def place_fitting(fitting: Plan = fitting, fitted: list[GangMember] = fitted) -> int:
                fitted[:] = _write(conn, request, fitting, roots, by_root, providers, class_names)
                return len(fitted)

            try:
                preempting = place_preempting(conn, request, resolved, cache, place_fitting, len(by_root), len(allowed))
            except _Refused as refused:
                trees[refused.index] = gang_tree(roots[refused.index], refused.took)
                continue
            if preempting is None:
                raise _refusal(conn, resolved, request, plan, by_root, fitting_trees, preempting=True)
            chosen = _with_preempting(request, fitted, preempting, len(by_root), len(allowed))
            refuse_existing(conn, chosen.not_placed)
            check_gang_quotas(conn, request, [m.consumer_uuid for m in chosen.members], chosen.preempted)
            return chosen
        if isinstance(plan, Shortfall):
            raise _refusal(conn, resolved, request, plan, by_root, fitting_trees)
        try:
            with conn.begin_nested():
                placed = _write(conn, request, plan, roots, by_root, providers, class_names)
        except _Refused as refused:
            trees[refused.index] = gang_tree(roots[refused.index], refused.took)
            continue
        placed_uuids = {member.consumer_uuid for member in placed}
        not_placed = tuple(c.uuid for c in request.consumers if c.uuid not in placed_uuids)
        refuse_existing(conn, not_placed)
        check_gang_quotas(conn, request, list(placed_uuids))
        return GangPick(tuple(placed), not_placed, asked, len(by_root), len(allowed))
    raise Conflict(
        f"No valid host for the gang of {asked}: {MOST_PLANS} plans in a row counted on trees that took fewer "
        "members when written (taken by concurrent claims meanwhile, or sharing providers with less room than "
        "their hosts).",
        code=error_codes.PICK_GANG_NO_VALID_HOST,
    )


_EXISTING = "SELECT uuid, generation FROM consumers WHERE uuid IN {ids} ORDER BY uuid"


def refuse_existing(conn: Connection, left_out: Sequence[str]) -> None:
    """``min_count`` leaves members out for lack of room, never for existing: a member that exists
    already refuses the whole gang (409, as the write refuses it when it is placed), wherever the
    room ran out."""
    if not left_out:
        return
    found = fetch(conn, _EXISTING, ids=left_out)
    if found:
        uuid, generation = found[0]
        raise ConcurrentUpdate(f"consumer generation conflict - expected null but got {generation} (consumer {uuid})")


def _with_preempting(
    request: GangRequest,
    fitted: Sequence[GangMember],
    preempting: Sequence[tuple[Consumer, Pick]],
    trees_fitted: int,
    trees_weighed: int,
) -> GangPick:
    """The answer of a gang that preempted: the members that fitted, then those placed by
    preempting, in the gang's order, and every consumer removed for them."""
    members = [
        *fitted,
        *(
            GangMember(consumer.uuid, pick.allocations, pick.mappings, pick.root_provider_uuid, pick.weight)
            for consumer, pick in preempting
        ),
    ]
    placed = {member.consumer_uuid for member in members}
    return GangPick(
        tuple(members),
        tuple(c.uuid for c in request.consumers if c.uuid not in placed),
        len(request.consumers),
        trees_fitted,
        trees_weighed,
        tuple(victim for _, pick in preempting for victim in pick.preempted),
    )


def tree_capacity(candidates: Sequence[Candidate], providers: Mapping[int, ProviderData], most: int) -> int:
    """How many members (up to ``most``) the tree takes, its candidates written first to last as the
    claims write them: each as often as its providers have room for, with what the ones before
    took counted. Exact for a tree whose providers' room only its own candidates draw on."""
    taken: Counter[tuple[int, int]] = Counter()
    count = 0
    for candidate in candidates:
        times = min(
            (
                (providers[pid].inventories[rc].free - taken[(pid, rc)]) // amount
                for pid, by_rc in candidate.allocations.items()
                for rc, amount in by_rc.items()
                if amount > 0
            ),
            default=most,
        )
        times = max(0, min(times, most - count))
        for pid, by_rc in candidate.allocations.items():
            for rc, amount in by_rc.items():
                taken[(pid, rc)] += amount * times
        count += times
        if count >= most:
            break
    return count


def _write(
    conn: Connection,
    request: GangRequest,
    plan: Plan,
    roots: Sequence[int],
    by_root: Mapping[int, Sequence[Candidate]],
    providers: Mapping[int, ProviderData],
    class_names: Mapping[int, str],
) -> list[GangMember]:
    """The plan written: leases, allocations and memberships of the members placed, in order."""
    group = request.server_group
    placed = list(zip(request.consumers, plan.trees, plan.weights, strict=False))
    if request.lease_seconds is not None:
        # Before the allocations: a lease's row is locked before its consumer's, by the reaper too.
        for consumer, _, _ in placed:
            set_lease(conn, consumer.uuid, request.lease_seconds)
    # Where each tree's next member starts among its candidates: one that refused stays full.
    start: Counter[int] = Counter()
    took: Counter[int] = Counter()
    written: list[GangMember] = []
    for consumer, index, weight in placed:
        root = roots[index]
        found = by_root[root]
        claimed: Claimed | None = claim_tree(conn, consumer, found[start[index] :], providers, class_names)
        if claimed is None:
            raise _Refused(index, took[index])
        start[index] += next(i for i, c in enumerate(found[start[index] :]) if c is claimed.candidate)
        took[index] += 1
        if group is not None:
            membership.add_member(conn, group.uuid, consumer.uuid, root)
        set_priority(conn, consumer.uuid, request.priority)
        written.append(GangMember(consumer.uuid, claimed.allocations, claimed.mappings, providers[root].uuid, weight))
    return written


def check_gang_quotas(
    conn: Connection, request: GangRequest, placed: Sequence[str], preempted: Sequence[Preempted] = ()
) -> None:
    """After the gang's write: its members placed (by consumer uuid) counted against their
    projects' (and users') quotas, as one claim each project and user makes, with what the victims
    removed for them held freed; a gang that passed a limit is refused whole (409
    ``berth.quota.exceeded``), its transaction rolled back."""
    written = set(placed)
    claimed = [consumer for consumer in request.consumers if consumer.uuid in written]
    check_claimed_quotas(conn, request.query, claimed, preempted)


def _hard_policy(group: ServerGroup | None) -> HardPolicy:
    if group is not None and group.policy == "affinity":
        return "affinity"
    if group is not None and group.policy == "anti-affinity":
        return "anti-affinity"
    return None


def _per_member(
    candidate: Candidate, sharing: frozenset[int], class_names: Mapping[int, str]
) -> tuple[float, float, float]:
    """What one member takes off its tree's free RAM, CPUs and disk (its own providers' part)."""
    amounts: Counter[str] = Counter()
    for pid, by_rc in candidate.allocations.items():
        if pid in sharing:
            continue
        for rc, amount in by_rc.items():
            amounts[class_names.get(rc, "")] += amount
    return float(amounts["MEMORY_MB"]), float(amounts["VCPU"] + amounts["PCPU"]), float(amounts["DISK_GB"])


def _topology(conn: Connection, topology: WithinUuids | SpreadOverUuids | None) -> Within | SpreadOver | None:
    """The topology by aggregate ids; 400 when an aggregate is unknown."""
    if topology is None:
        return None
    found = aggregate_ids(conn, topology.aggregates)
    unknown = [uuid for uuid in topology.aggregates if uuid not in found]
    if unknown:
        raise BadRequest(
            f"The topology names aggregates no provider is in: {', '.join(unknown)}.",
            code=error_codes.PICK_GANG_UNKNOWN_AGGREGATE,
        )
    ids = tuple(found[uuid] for uuid in topology.aggregates)
    if isinstance(topology, SpreadOverUuids):
        return SpreadOver(ids, topology.max_skew)
    return Within(ids)


def _refusal(
    conn: Connection,
    resolved: ResolvedQuery,
    request: GangRequest,
    shortfall: Shortfall,
    by_root: Mapping[int, Sequence[Candidate]],
    fitting: Mapping[int, Sequence[Candidate]],
    *,
    preempting: bool = False,
) -> Conflict:
    group = request.server_group
    why = _REASONS[shortfall.reason].format(
        policy=group.policy if group is not None else "", group=group.uuid if group is not None else ""
    )
    if shortfall.reason == "room" and not by_root:
        avoided = avoided_refusal(fitting, by_root)
        why = avoided.rstrip(".") if avoided else why + f" ({nothing_fits(conn, resolved)})"
    if preempting:
        why += f"; nor could preempting consumers of priority below {request.priority} make room for enough of them"
    return Conflict(
        f"No valid host for the gang: {shortfall.most} of its {len(request.consumers)} members could be "
        f"placed, fewer than the {request.min_count} asked for; stopped by {why}.",
        code=error_codes.PICK_GANG_NO_VALID_HOST,
    )
