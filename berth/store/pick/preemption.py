"""Preemption: when nothing fits a pick that may preempt, make room on one tree by removing consumers
of strictly lower priority, and claim it, in the pick's own write transaction.

Called by ``berth.store.pick.transaction`` only where the pick would answer ``no_valid_host``, so a
pick that does not preempt, or that finds room without preempting, costs what it did.

1. The lower-priority consumers and what they hold, where: one statement over the allocations, each
   joined with its consumer's priority (``consumer_priorities``; none is 0) and kept when that
   priority is strictly below the pick's and the consumer is not a move's migration consumer
   (consumer type ``MIGRATION``: the source's side of a move, whose instance holds the other).
2. The trees holding any of them (on the tree's own providers or on a sharing provider anchored to
   it), that the server group's hard policy allows, loaded as the candidate search loads them
   (``CandidateFinder.tree_views``). A tree where the request would not fit even with every one of
   them removed is never touched.
3. For each other tree, the cheapest set of victims that makes room (``cheapest_victims``), the room
   decided by the very search of ``GET /allocation_candidates`` over the tree's usage less the
   victims' allocations. The cost of a set, least first: the number of victims; then the highest
   priority among them; then the sum of their priorities; then their youth: their creation times,
   oldest first, compared one by one, the later the cheaper (so the set whose oldest victim is the
   youngest); then their uuids, so that the choice is the same every time. Exact, every subset tried
   in that order, for a tree of at most ``EXACT_UP_TO`` lower-priority consumers (and while the
   request's ``MOST_CHECKS`` room checks last); above that, greedy: victims taken in the order of
   that cost (lowest priority, then youngest) until the request fits, then each dropped again, the
   dearest first, when the request still fits without it. The greedy set is minimal by inclusion,
   and the cheapest when the victims hold the same amounts (the usual case of one flavor).
4. Trees by the cost of their set, then in the pick's usual weighing order (the trees as they are,
   ties at random). The first one's victims are removed whole, every allocation of each, everywhere,
   through the store's own delete path (``delete_consumer_allocations``: usages, generations and the
   victims' priority rows move as for any DELETE), recorded in ``preemptions``, and the tree is
   searched again and claimed by the conditional write every allocation goes through.

All of step 4 runs inside a SAVEPOINT. On PostgreSQL another transaction may have removed a victim
or taken the room meanwhile: the victims' consumer rows are locked first, in uuid order, and when a
victim is gone or changed, or the room is taken, the SAVEPOINT is rolled back (the victims keep
their allocations) and everything is worked out again from what is committed then, at most
``MOST_ATTEMPTS`` times.
"""

from __future__ import annotations

import datetime
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Connection

from berth.domain.candidates import Candidate, InventoryData, ProviderData, SearchBudget, TreeView, search
from berth.domain.errors import ConcurrentUpdate
from berth.domain.weighing import best_first, weigh
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.names import ResolvedQuery
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.leases.ledger import drop_leases
from berth.store.pick.avoided import avoided_roots
from berth.store.pick.claim import claim_tree
from berth.store.pick.host_facts import host_facts_of
from berth.store.pick.priorities import DEFAULT_PRIORITY
from berth.store.pick.request import Pick, PickRequest, Preempted, soft_policy
from berth.store.placement.allocations import delete_consumer_allocations
from berth.store.rawsql import db_time, execute, fetch, py_time
from berth.store.server_groups import membership
from berth.store.util import utcnow

# Lower-priority consumers on one tree up to which every subset of them is tried (2**12 sets).
EXACT_UP_TO: Final = 12
# Room checks (searches of one tree) one preempting pick may spend on exact choices; past them the
# greedy choice is made for the trees left.
MOST_CHECKS: Final = 20_000
# The consumer type of a move's migration consumer (Nova's), never a victim.
MIGRATION_TYPE: Final = "MIGRATION"
# Times the whole choice is made again after a concurrent writer took a victim or the room.
MOST_ATTEMPTS: Final = 16
# Candidates of the chosen tree searched again after its victims are removed.
_CANDIDATES_AFTER: Final = 4
# Search steps for one room check: a tree's search is a few steps; the bound is for a pathological one.
_STEPS_PER_CHECK: Final = 10_000
_EVERY_CANDIDATE: Final = 2**62

# A migration consumer holds the source's side of a move in flight for an instance that holds the
# other side (its priority is the instance's, which the migration consumer has no row of): it is
# never a victim, as removing it would leave the move nothing to revert to.
_NOT_MIGRATION = (
    "(c.consumer_type_id IS NULL OR c.consumer_type_id NOT IN "
    f"(SELECT id FROM consumer_types WHERE name = '{MIGRATION_TYPE}'))"
)
_LOWER = f"""
SELECT a.consumer_id, a.resource_provider_id, a.resource_class_id, a.used,
       COALESCE(cp.priority, 0), c.created_at, pr.external_id, us.external_id
FROM allocations a
JOIN consumers c ON c.uuid = a.consumer_id
JOIN projects pr ON pr.id = c.project_id
JOIN users us ON us.id = c.user_id
LEFT JOIN consumer_priorities cp ON cp.consumer_uuid = a.consumer_id
WHERE COALESCE(cp.priority, 0) < ? AND {_NOT_MIGRATION}"""
# For a pick of priority 0 or below, only consumers with a row of their own can be lower: read from
# those rows (through their priority's index) instead of from every allocation.
_LOWER_THAN_DEFAULT = f"""
SELECT a.consumer_id, a.resource_provider_id, a.resource_class_id, a.used, cp.priority, c.created_at,
       pr.external_id, us.external_id
FROM consumer_priorities cp
JOIN allocations a ON a.consumer_id = cp.consumer_uuid
JOIN consumers c ON c.uuid = a.consumer_id
JOIN projects pr ON pr.id = c.project_id
JOIN users us ON us.id = c.user_id
WHERE cp.priority < ? AND {_NOT_MIGRATION}"""
_LOCK_CONSUMERS = "SELECT uuid FROM consumers WHERE uuid IN {ids} ORDER BY uuid FOR UPDATE"
_HELD_BY = (
    "SELECT consumer_id, resource_provider_id, resource_class_id, used FROM allocations WHERE consumer_id IN {ids}"
)
_RECORD = """
INSERT INTO preemptions (consumer_uuid, project_id, priority, root_provider_uuid, preempted_by, preempted_at)
VALUES (?, ?, ?, ?, ?, ?)"""


@dataclass
class Holder:
    """A consumer of lower priority than the pick's, and what it holds."""

    uuid: str
    priority: int
    created_at: Any
    project_id: str
    # (provider id, class id) -> amount
    held: dict[tuple[int, int], int] = field(default_factory=dict)
    # Its rank by creation time, the youngest 0, those created at the same moment (a gang's members)
    # ranked alike (set once every holder is read).
    youth: int = 0
    user_id: str = ""


@dataclass(frozen=True)
class _Choice:
    root_id: int
    victims: tuple[Holder, ...]
    cost: tuple[Any, ...]


class _Stale(Exception):
    """A victim or the room was taken by a concurrent writer: the attempt is rolled back."""


def cost_of(victims: Sequence[Holder]) -> tuple[Any, ...]:
    """The cost of a set of victims, least first (the module's docstring says the order)."""
    return (
        len(victims),
        max(v.priority for v in victims),
        sum(v.priority for v in victims),
        tuple(sorted((v.youth for v in victims), reverse=True)),
    )


def cheapest_victims(
    holders: Sequence[Holder],
    fits: Callable[[Sequence[Holder]], bool],
    checks: Counter[str],
    most: int | None = None,
) -> tuple[Holder, ...] | None:
    """The cheapest set of ``holders`` (in a fixed order: sets of equal cost are taken in the
    order of their combinations) whose removal makes room (``fits``), or None when even all of them
    do not, or when it is known to take more than ``most`` victims (another tree needs no more).
    ``checks["room"]`` counts the room checks made, against ``MOST_CHECKS``."""
    checks["room"] += 1
    if not fits(holders):
        return None
    if len(holders) <= EXACT_UP_TO:
        largest = len(holders) if most is None else min(most, len(holders))
        for size in range(1, largest + 1):
            sets = sorted(itertools.combinations(holders, size), key=cost_of)
            if checks["room"] + len(sets) > MOST_CHECKS:
                return _greedy(holders, fits, checks)
            for victims in sets:
                checks["room"] += 1
                if fits(victims):
                    return victims
        if largest < len(holders):
            return None  # more victims than another tree needs
    return _greedy(holders, fits, checks)


def _greedy(
    holders: Sequence[Holder], fits: Callable[[Sequence[Holder]], bool], checks: Counter[str]
) -> tuple[Holder, ...]:
    """Victims in the order of cost until the request fits, then each dropped again (the dearest
    first) when it still fits without it: minimal by inclusion."""
    ordered = sorted(holders, key=lambda h: (h.priority, h.youth, h.uuid))
    chosen: list[Holder] = []
    for holder in ordered:
        chosen.append(holder)
        checks["room"] += 1
        if fits(chosen):
            break
    for holder in reversed(list(chosen)):
        without = [h for h in chosen if h is not holder]
        if without:
            checks["room"] += 1
            if fits(without):
                chosen = without
    return tuple(chosen)


def preempt_and_claim(
    conn: Connection,
    request: PickRequest,
    resolved: ResolvedQuery,
    cache: ProviderCache,
    trees_fitted: int,
    trees_weighed: int,
) -> Pick | None:
    """Remove the cheapest set of lower-priority consumers that makes room on one tree the group
    allows, and claim that tree; None when no tree can be made room on."""
    for _ in range(MOST_ATTEMPTS):
        try:
            with conn.begin_nested():
                return _attempt(conn, request, resolved, cache, trees_fitted, trees_weighed)
        except _Stale:
            continue
    return None


def _holders(conn: Connection, priority: int) -> dict[str, Holder]:
    holders: dict[str, Holder] = {}
    sql = _LOWER_THAN_DEFAULT if priority <= DEFAULT_PRIORITY else _LOWER
    for consumer, provider_id, rc, used, held_priority, created_at, project, user in fetch(conn, sql, (priority,)):
        holder = holders.get(consumer)
        if holder is None:
            holder = holders[consumer] = Holder(consumer, int(held_priority), created_at, project, user_id=user)
        key = (provider_id, rc)
        holder.held[key] = holder.held.get(key, 0) + used
    moments = sorted({h.created_at for h in holders.values()}, reverse=True)
    youth = {moment: rank for rank, moment in enumerate(moments)}
    for holder in holders.values():
        holder.youth = youth[holder.created_at]
    return holders


def _attempt(
    conn: Connection,
    request: PickRequest,
    resolved: ResolvedQuery,
    cache: ProviderCache,
    trees_fitted: int,
    trees_weighed: int,
) -> Pick | None:
    holders = _holders(conn, request.priority)
    if request.moving is not None:
        # The instance a move places again is the move's own: removing it would end the server
        # being moved (and free its quota twice, as both victim and moving instance).
        holders.pop(request.moving, None)
    if not holders:
        return None
    finder = CandidateFinder(conn, resolved.request, cache, limit=None, max_candidates=_EVERY_CANDIDATE)
    sharing_ids = frozenset(finder.sharing)
    on_provider: dict[int, list[Holder]] = defaultdict(list)
    for holder in holders.values():
        for provider_id in {pid for pid, _ in holder.held}:
            on_provider[provider_id].append(holder)
    roots = sorted(_roots_of(conn, on_provider, finder) - avoided_roots(conn, request.avoid_trees))
    group = request.server_group
    members = membership.member_hosts(conn, group, sharing_ids) if group is not None else Counter[int]()
    policy = group.policy if group is not None else None
    views = [
        view
        for view in finder.tree_views(roots)
        if not (members and policy == "anti-affinity" and view.root.id in members)
        and not (members and policy == "affinity" and view.root.id not in members)
    ]
    checks: Counter[str] = Counter()
    choices: list[_Choice] = []
    for view in views:
        pool = {p.id for p in view.pool}
        on_tree = {h.uuid: h for pid in pool for h in on_provider.get(pid, ())}
        if not on_tree:
            continue

        def fits(victims: Sequence[Holder], view: TreeView = view) -> bool:
            return _fits(_without(view, victims), resolved, sharing_ids)

        fewest = min((len(c.victims) for c in choices), default=None)
        found = cheapest_victims(sorted(on_tree.values(), key=lambda h: h.uuid), fits, checks, fewest)
        if found is not None:
            choices.append(_Choice(view.root.id, found, cost_of(found)))
    if not choices:
        return None
    chosen_roots = [choice.root_id for choice in choices]
    facts = host_facts_of(
        conn,
        chosen_roots,
        finder.providers,
        finder.sharing_by_aggregate,
        members,
        bool(request.multipliers.instances),
    )
    weights = weigh(facts, request.multipliers, soft_policy(group))
    position = {index: rank for rank, index in enumerate(best_first(weights))}
    best = min(range(len(choices)), key=lambda index: (choices[index].cost, position[index]))
    choice = choices[best]
    root_uuid = finder.providers[choice.root_id].uuid
    _remove(conn, choice.victims)
    now = db_time(conn, utcnow())
    for victim in sorted(choice.victims, key=lambda v: v.uuid):
        execute(
            conn,
            _RECORD,
            (victim.uuid, victim.project_id, victim.priority, root_uuid, request.consumer.uuid, now),
        )
    class_names = {rc: name for name, rc in resolved.class_ids.items()}
    after = CandidateFinder(conn, resolved.request, cache, limit=_CANDIDATES_AFTER, max_candidates=_CANDIDATES_AFTER)
    claimed = claim_tree(conn, request.consumer, after.candidates_in(choice.root_id), after.providers, class_names)
    if claimed is None:
        raise _Stale()
    if group is not None:
        membership.add_member(conn, group.uuid, request.consumer.uuid, choice.root_id)
    preempted = tuple(
        Preempted(
            victim.uuid, victim.project_id, victim.priority, root_uuid, victim.user_id, _held(victim, class_names)
        )
        for victim in sorted(choice.victims, key=lambda v: v.uuid)
    )
    return Pick(
        claimed.allocations,
        claimed.mappings,
        root_uuid,
        weights[best],
        trees_fitted,
        trees_weighed,
        (),
        preempted,
    )


def _roots_of(conn: Connection, on_provider: Mapping[int, list[Holder]], finder: CandidateFinder) -> set[int]:
    """The trees whose pool holds a lower-priority consumer: those of its providers, and for a
    sharing provider every tree anchored to it."""
    roots: set[int] = set()
    ids = sorted(on_provider)
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000]
        roots.update(
            root
            for (root,) in fetch(conn, "SELECT root_provider_id FROM resource_providers WHERE id IN {ids}", ids=chunk)
        )
    shared = [finder.sharing[pid] for pid in on_provider if pid in finder.sharing]
    aggregates = sorted({a for provider in shared for a in provider.aggregates})
    if aggregates:
        roots.update(
            root
            for (root,) in fetch(
                conn,
                "SELECT DISTINCT p.root_provider_id FROM resource_provider_aggregates ra "
                "JOIN resource_providers p ON p.id = ra.resource_provider_id WHERE ra.aggregate_id IN {ids}",
                ids=aggregates,
            )
        )
    return roots


def _without(view: TreeView, victims: Sequence[Holder]) -> TreeView:
    """The tree as it would be with the victims' allocations gone (copies: the providers are the
    process's cached ones)."""
    freed: dict[int, dict[int, int]] = defaultdict(dict)
    pool = {p.id for p in view.pool}
    for victim in victims:
        for (provider_id, rc), amount in victim.held.items():
            if provider_id in pool:
                freed[provider_id][rc] = freed[provider_id].get(rc, 0) + amount
    if not freed:
        return view
    copies = {pid: _freed(provider, freed[pid]) for pid, provider in ((p.id, p) for p in view.pool) if pid in freed}

    def swap(providers: list[ProviderData]) -> list[ProviderData]:
        return [copies.get(p.id, p) for p in providers]

    root = copies.get(view.root.id, view.root)
    return TreeView(root, swap(view.members), swap(view.sharing))


def _freed(provider: ProviderData, amounts: Mapping[int, int]) -> ProviderData:
    inventories = dict(provider.inventories)
    for rc, amount in amounts.items():
        inventory = inventories.get(rc)
        if inventory is None:
            continue
        inventories[rc] = InventoryData(
            inventory.total,
            inventory.reserved,
            inventory.min_unit,
            inventory.max_unit,
            inventory.step_size,
            inventory.allocation_ratio,
            inventory.used - amount,
        )
    return ProviderData(
        provider.id,
        provider.uuid,
        provider.parent_id,
        provider.root_id,
        inventories,
        provider.traits,
        provider.aggregates,
    )


def _fits(view: TreeView, resolved: ResolvedQuery, sharing_ids: frozenset[int]) -> bool:
    found: list[Candidate] = search(
        [view],
        resolved.request,
        limit=1,
        budget=SearchBudget(_STEPS_PER_CHECK),
        seen=set(),
        sharing_ids=sharing_ids,
    )
    return bool(found)


def _held(victim: Holder, class_names: Mapping[int, str]) -> dict[str, int]:
    """What the victim held of the classes the pick asks for, by name: what its removal frees
    towards the pick's quota check (the classes it does not ask for are never checked)."""
    held: dict[str, int] = defaultdict(int)
    for (_, rc), amount in victim.held.items():
        if rc in class_names:
            held[class_names[rc]] += amount
    return dict(held)


def _remove(conn: Connection, victims: Sequence[Holder]) -> None:
    """Every allocation of each victim, through the store's delete path; their consumer rows locked
    first in uuid order on PostgreSQL, so that two preempting picks wait for each other instead of
    deadlocking. A victim gone or changed meanwhile makes the attempt stale."""
    uuids = sorted(v.uuid for v in victims)
    # A victim's lease would release nothing now, and a confirmation of it would keep nothing.
    drop_leases(conn, uuids)
    if conn.dialect.name == "postgresql":
        locked = {uuid for (uuid,) in fetch(conn, _LOCK_CONSUMERS, ids=uuids)}
        if locked != set(uuids):
            raise _Stale()
        # Locked: what they hold now is what they will have held when removed.
        held: dict[str, dict[tuple[int, int], int]] = defaultdict(dict)
        for consumer, provider_id, rc, used in fetch(conn, _HELD_BY, ids=uuids):
            held[consumer][(provider_id, rc)] = held[consumer].get((provider_id, rc), 0) + used
        if any(held[v.uuid] != v.held for v in victims):
            raise _Stale()
    for uuid in uuids:
        try:
            removed = delete_consumer_allocations(conn, uuid)
        except ConcurrentUpdate:
            raise _Stale() from None
        if not removed:
            raise _Stale()


# --- the record ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Preemption:
    """One consumer removed by a preempting pick: whose, of what priority, from which tree, by whom,
    when."""

    consumer_uuid: str
    project_id: str
    priority: int
    root_provider_uuid: str
    preempted_by: str
    preempted_at: datetime.datetime


_COLUMNS = "consumer_uuid, project_id, priority, root_provider_uuid, preempted_by, preempted_at"


def _preemption(row: Sequence[Any]) -> Preemption:
    consumer, project, priority, root, by, at = row
    moment = py_time(at)
    assert moment is not None
    return Preemption(consumer, project, int(priority), root, by, moment)


def list_preemptions(
    conn: Connection,
    *,
    preempted_by: str | None = None,
    since: datetime.datetime | None = None,
    limit: int | None = None,
) -> list[Preemption]:
    """The consumers preempted, the newest first; only those preempted by one consumer, at or after
    a moment, up to ``limit``, when asked."""
    sql = f"SELECT {_COLUMNS} FROM preemptions WHERE 1 = 1"
    params: list[Any] = []
    if preempted_by is not None:
        sql += " AND preempted_by = ?"
        params.append(preempted_by)
    if since is not None:
        sql += " AND preempted_at >= ?"
        params.append(db_time(conn, since))
    sql += " ORDER BY preempted_at DESC, id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_preemption(row) for row in fetch(conn, sql, params)]


def preemption_of(conn: Connection, consumer_uuid: str) -> Preemption | None:
    """The newest record of the consumer's preemption, if it was preempted."""
    rows = fetch(
        conn,
        f"SELECT {_COLUMNS} FROM preemptions WHERE consumer_uuid = ? ORDER BY preempted_at DESC, id DESC LIMIT 1",
        (consumer_uuid,),
    )
    return _preemption(rows[0]) if rows else None
