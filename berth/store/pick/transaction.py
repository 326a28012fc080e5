"""Pick and claim: weigh every tree that fits a request, choose one, and write the allocation, in one
transaction.

The steps, all inside the caller's write transaction (``Database.write``):

1. lock the server group, if one is named (``berth.store.server_groups.membership``): picks for one group run
   one after another, so that each sees the placements of those before it;
2. resolve and search the candidates exactly as ``GET /allocation_candidates`` does
   (``resolve``, ``CandidateFinder``), without its limit;
3. drop the trees the group's policy forbids: under anti-affinity those holding a member, under
   affinity all but those holding a member (when there is one);
4. weigh the trees left (``berth.domain.weighing``) and try them best first, ties in random order;
   each try writes the consumer's allocations through ``replace_allocations`` inside a SAVEPOINT,
   so that a tree whose capacity a concurrent writer took meanwhile (on PostgreSQL, whose
   statements each see what is committed when they start) is given up for the next one and no
   candidate is tried twice (the API's first try of a planned tree goes without one: refused, the
   whole write is rolled back and run again with them, ``bare_first_claim``);
5. record the group membership in the same transaction, and the lease if one is asked for (set
   before the allocations are written, in the lock order ``berth.store.leases.ledger`` gives);
6. name the alternates asked for: the trees after the one claimed in the same order, searched
   again after the write (``berth.store.pick.alternates``);
7. check the project's quota against the usage the write left (``berth.store.pick.quota_check``):
   a pick over a limit is refused, and its transaction rolled back. On PostgreSQL a pick for a
   project with limits counts its consumer itself, in the statement that checks
   (``berth.store.quotas.own_count``), having told the counters' triggers so before step 1.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

from sqlalchemy import Connection

from berth.domain import error_codes
from berth.domain.candidates import Candidate, ProviderData
from berth.domain.errors import Conflict
from berth.domain.weighing import best_first, weigh
from berth.store.candidates.explain import explain
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.names import ResolvedQuery, resolve
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.leases.ledger import set_lease
from berth.store.pick.alternates import alternates_after
from berth.store.pick.avoided import avoided_roots, without_avoided
from berth.store.pick.board.on_board import BoardPlan, claim_on_board
from berth.store.pick.claim import claim_tree
from berth.store.pick.host_facts import host_facts_of
from berth.store.pick.preemption import preempt_and_claim
from berth.store.pick.priorities import set_priority
from berth.store.pick.quota_check import check_claimed_quota, count_own_consumer, moving_holdings
from berth.store.pick.request import Consumer, Pick, PickRequest, soft_policy
from berth.store.server_groups import membership
from berth.store.server_groups.membership import ServerGroup

__all__ = ["Consumer", "Pick", "PickRequest", "ServerGroup", "pick_and_claim"]

# The finder's cap on candidates, high enough never to be met: every tree is weighed. The search's
# step budget still bounds the work of a pathological request.
EVERY_CANDIDATE: Final = 2**62


def pick_and_claim(
    conn: Connection,
    request: PickRequest,
    cache: ProviderCache,
    plan: BoardPlan | None = None,
    *,
    last: bool = False,
    bare_first_claim: bool = False,
) -> Pick:
    """Choose the best tree for the request and claim it for the consumer; 409 when none fits.

    With a ``plan`` (``berth.store.pick.board.on_board.plan_on_board``, made in a read just before), its trees
    are tried first; when none of them can be claimed, every tree is searched. When none fits and the
    request may preempt, consumers of lower priority are removed to make room
    (``berth.store.pick.preemption``). The consumer's priority is kept with it. ``last``: nothing
    follows the pick in the transaction (the API's), whose COMMIT may then carry its quota check.
    ``bare_first_claim``: the planned tree claimed first is written without a SAVEPOINT, and if it
    is refused ``berth.store.pick.claim.BareClaimRefused`` is raised, for the caller to roll the
    transaction back and run the pick again without it (``claim_tree``)."""
    counts_own = count_own_consumer(conn, request.consumer)
    chosen = _pick_and_claim(conn, request, cache, plan, bare_first_claim)
    set_priority(conn, request.consumer.uuid, request.priority)
    moving = moving_holdings(conn, request.moving, request.query) if request.moving is not None else ()
    check_claimed_quota(conn, request.query, request.consumer, chosen.preempted, counts_own, moving=moving, last=last)
    return chosen


def _pick_and_claim(
    conn: Connection, request: PickRequest, cache: ProviderCache, plan: BoardPlan | None, bare_first_claim: bool
) -> Pick:
    group = request.server_group
    if group is not None:
        membership.lock_group(conn, group.uuid, group.policy)
    if request.lease_seconds is not None:
        # Before the allocations: a lease's row is locked before its consumer's, by the reaper too.
        set_lease(conn, request.consumer.uuid, request.lease_seconds)
    resolved = resolve(conn, request.query)
    if plan is not None:
        chosen = claim_on_board(conn, request, resolved, cache, plan, bare_first_claim=bare_first_claim)
        if chosen is not None:
            return chosen
    finder = CandidateFinder(conn, resolved.request, cache, limit=None, max_candidates=EVERY_CANDIDATE)
    candidates, providers = finder.find()
    sharing = frozenset(finder.sharing)
    fitting = candidates_by_root(candidates, providers, sharing)
    by_root = without_avoided(fitting, avoided_roots(conn, request.avoid_trees))
    members = membership.member_hosts(conn, group, sharing) if group is not None else Counter[int]()
    allowed = allowed_by_group(by_root, group, members)
    if not allowed:
        return _preempt_or_refuse(
            conn,
            request,
            resolved,
            cache,
            len(by_root),
            lambda: _group_refusal(by_root, group) or avoided_refusal(fitting, by_root) or nothing_fits(conn, resolved),
        )
    roots = list(allowed)
    facts = host_facts_of(
        conn, roots, providers, finder.sharing_by_aggregate, members, bool(request.multipliers.instances)
    )
    weights = weigh(facts, request.multipliers, soft_policy(group))
    class_names = {rc: name for name, rc in resolved.class_ids.items()}
    order = best_first(weights)
    for position, index in enumerate(order):
        root_id = roots[index]
        claimed = claim_tree(conn, request.consumer, allowed[root_id], providers, class_names)
        if claimed is None:
            continue
        if group is not None:
            membership.add_member(conn, group.uuid, request.consumer.uuid, root_id)
        alternates = alternates_after(
            conn,
            resolved.request,
            cache,
            wanted=request.alternates,
            ranked=((roots[later], weights[later]) for later in order[position + 1 :]),
            claimed_root=root_id,
            group=group,
            members=members,
            class_names=class_names,
        )
        return Pick(
            claimed.allocations,
            claimed.mappings,
            providers[root_id].uuid,
            weights[index],
            len(by_root),
            len(allowed),
            alternates,
        )
    return _preempt_or_refuse(
        conn,
        request,
        resolved,
        cache,
        len(by_root),
        lambda: f"the {len(allowed)} trees that fit were all taken by concurrent claims meanwhile.",
        weighed=len(allowed),
    )


def _preempt_or_refuse(
    conn: Connection,
    request: PickRequest,
    resolved: ResolvedQuery,
    cache: ProviderCache,
    fitted: int,
    why: Callable[[], str],
    weighed: int = 0,
) -> Pick:
    """Where nothing fits: the preemption, when the request may preempt; else (or when that finds no
    tree either) the refusal, saying why."""
    if request.preempt:
        chosen = preempt_and_claim(conn, request, resolved, cache, fitted, weighed)
        if chosen is not None:
            return chosen
        raise _no_valid_host(
            f"{why()} Nor can any tree be made room on by preempting consumers of priority below {request.priority}."
        )
    raise _no_valid_host(why())


def _no_valid_host(why: str) -> Conflict:
    return Conflict(f"No valid host: {why}", code=error_codes.PICK_NO_VALID_HOST)


# --- which trees ---------------------------------------------------------------------------------


def _root_of(candidate: Candidate, providers: Mapping[int, ProviderData], sharing: Collection[int]) -> int:
    """The tree a candidate places the consumer in: that of its providers other than sharing ones."""
    placed = [*candidate.allocations, *(pid for ids in candidate.mappings.values() for pid in ids)]
    own = next((pid for pid in placed if pid not in sharing), placed[0])
    return providers[own].root_id


def candidates_by_root(
    candidates: Sequence[Candidate], providers: Mapping[int, ProviderData], sharing: Collection[int]
) -> dict[int, list[Candidate]]:
    """The candidates of each tree, in the search's order."""
    by_root: dict[int, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        by_root[_root_of(candidate, providers, sharing)].append(candidate)
    return dict(by_root)


def allowed_by_group(
    by_root: dict[int, list[Candidate]], group: ServerGroup | None, members: Counter[int]
) -> dict[int, list[Candidate]]:
    """The trees the group's hard policy leaves; soft policies only weigh."""
    if group is None or not members:
        return by_root
    if group.policy == "anti-affinity":
        return {root: found for root, found in by_root.items() if root not in members}
    if group.policy == "affinity":
        return {root: found for root, found in by_root.items() if root in members}
    return by_root


# --- why nothing fits ------------------------------------------------------------------------------


def _group_refusal(by_root: Mapping[int, list[Candidate]], group: ServerGroup | None) -> str | None:
    """Why the group's policy left none of the trees that fit, if it did."""
    if not by_root or group is None:
        return None
    if group.policy == "anti-affinity":
        return (
            f"every one of the {len(by_root)} trees that fit holds a member of anti-affinity server group {group.uuid}."
        )
    return (
        f"no tree holding a member of affinity server group {group.uuid} fits the request "
        f"({len(by_root)} other trees do)."
    )


def avoided_refusal(fitting: Mapping[int, object], by_root: Mapping[int, object]) -> str | None:
    """Why no tree is left when every tree that fits is one the request avoids (``avoid_trees``), if
    that is why: the query's conditions are met, and ``nothing_fits`` would find none unmet."""
    if by_root or not fitting:
        return None
    return f"every one of the {len(fitting)} trees that fit is among the trees to avoid (avoid_trees)."


def nothing_fits(conn: Connection, resolved: ResolvedQuery) -> str:
    """The first condition of the request that no provider meets, from the explain counts."""
    report = explain(
        conn,
        resolved.request,
        class_names={rc: name for name, rc in resolved.class_ids.items()},
        trait_names={trait: name for name, trait in resolved.trait_ids.items()},
        aggregate_uuids={aggregate: uuid for uuid, aggregate in resolved.aggregate_ids.items()},
    )
    unmet = [
        (group_report["suffix"], condition["condition"])
        for group_report in report["groups"]
        for condition in group_report["conditions"]
        if condition["remaining"] == 0
    ]
    if unmet:
        suffix, condition = unmet[0]
        return f"no provider {condition}" + (f" (request group {suffix!r})." if suffix else ".")
    root_unmet = [condition["condition"] for condition in report["root"] if condition["remaining"] == 0]
    if root_unmet:
        return f"no provider's {root_unmet[0]}."
    return "no tree can hold every part of the request together."
