"""A pick weighed on the board (``berth.store.pick.board.host_board``): every tree's facts at once.

For a pick of a request that asks resources, but no tree nor traits of its providers (those of the
root are the board's; ``CandidateRequest.board_amounts``),
without the instances weigher, a tree may fit when, for each class asked, one of its providers has
room for the most one group asks of it, or a sharing provider with that room is in an aggregate
with one of them; the board tells the first for every tree in one comparison, and the few sharing
providers the second. The root's traits, and the aggregates the unsuffixed group names, narrow
the trees further (a tree may serve that group only with a provider in them, or one of the
sharing providers in them); the rest of what the request asks (granular groups, their traits and
aggregates, policies) is applied by the search of each tree the plan tries. The trees that may fit
and that the server group allows are weighed together (``weigh_arrays``: the weights
``berth.domain.weighing.weigh`` gives), in a read before the pick's write transaction
(``plan_on_board``), which on SQLite holds every other writer back. In the write
(``claim_on_board``), the planned trees are tried best first, ties in random order, each only if
the server group's policy, read again under its lock, still allows it: the candidates the read
found for it are written by the conditional write every allocation goes through, and when that
refuses (taken meanwhile), the tree is searched again as the transaction sees it. The trees after
the one claimed, in the same order, give the pick's alternates (``berth.store.pick.alternates``).

``None`` (the caller then searches every tree) when no tree on the board can be claimed after
``MOST_TRIES``: a board that is behind the books must not turn into a refusal while a tree fits.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Final

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from berth.domain.candidate_request import CandidateRequest
from berth.domain.candidates import Candidate, ProviderData
from berth.domain.weighing import Multipliers, free_amount
from berth.domain.weighing_arrays import best_first_of, weigh_arrays
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.names import ResolvedQuery, resolve
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.pick.alternates import alternates_after, group_allows
from berth.store.pick.avoided import avoided_roots, board_mask
from berth.store.pick.board.host_board import BoardView, FloatArray, HostBoard, IndexArray, weighed_classes
from berth.store.pick.board.kept_weights import Weighed, WeighedRequest, kept_weights
from berth.store.pick.claim import claim_tree
from berth.store.pick.request import Pick, PickRequest, soft_policy
from berth.store.server_groups import membership

BoolArray = npt.NDArray[np.bool_]

MOST_TRIES: Final = 16
# Trees whose candidates are searched in the read, before the write transaction: the first is
# nearly always the one claimed.
SEARCHED_IN_THE_READ: Final = 2
# Candidates of one tree tried before the next tree: a plain request's are the same amounts on
# other providers of the tree.
CANDIDATES_PER_TREE: Final = 4


def on_board(request: CandidateRequest, multipliers: Multipliers) -> bool:
    """Whether a gang of ``request`` can be weighed on the board (``CandidateRequest.weighable_resources``)."""
    return request.weighable_resources is not None and not multipliers.instances


@dataclass(frozen=True)
class PlannedTree:
    """A tree worth trying, with its weight and, for the first few, its candidates as the read saw
    them (empty: searched in the write)."""

    index: int
    root_id: int
    weight: float
    candidates: Sequence[Candidate] = ()


@dataclass(frozen=True)
class BoardPlan:
    """What a pick weighed on the board before its write transaction: the trees to try, best first."""

    view: BoardView
    board: HostBoard
    trees: Sequence[PlannedTree]
    # Every provider the planned candidates name.
    providers: Mapping[int, ProviderData]
    sharing_ids: frozenset[int]
    weighed: Mapping[int, str]
    fitted: int
    allowed: int
    # The trees ranked after ``trees``, then those the board thought too full (freed since it was
    # read?), worked out only as far as the pick's alternates go.
    rest: Iterator[PlannedTree]
    # What the claim took, for the board once the transaction has committed (``committed``).
    taken: list[Callable[[], None]] = field(default_factory=list)

    def committed(self) -> None:
        """The claim's transaction committed: what it took comes off the worker's board now, so that
        the next picks of this worker see it before the next refresh. Not before: a pick refused as
        it commits (a quota's refusal) wrote nothing, and a tree the refresh has no reason to read
        again would have looked fuller than it is until it next changed."""
        for take in self.taken:
            take()
        self.taken.clear()


def plan_on_board(conn: Connection, request: PickRequest, cache: ProviderCache, board: HostBoard) -> BoardPlan | None:
    """In a read, before the pick's write transaction (which on SQLite holds back every writer):
    the trees of the board worth trying, best first, and the first ones' candidates; None when the
    request is not one the board weighs, or no tree on it may fit."""
    resolved = resolve(conn, request.query)
    plain = resolved.request.board_amounts
    if plain is None or request.multipliers.instances:
        return None
    board.read_if_empty(conn, cache)
    board.catch_up_if_quiet()
    view = board.use()
    if not len(view.roots):
        return None
    # The sharing providers as the board's last refresh read them (``HostBoard.pools``).
    finder = CandidateFinder(
        conn,
        resolved.request,
        cache,
        limit=CANDIDATES_PER_TREE,
        max_candidates=CANDIDATES_PER_TREE,
        sharing=board.pools(),
    )
    sharing = finder.sharing
    required, forbidden = resolved.request.root_required, resolved.request.root_forbidden
    # The search of one tree does not look at its root's traits (the search of every tree reads
    # them with the trees): the board decides them. Each mask below is left out (None: every tree)
    # where it would keep every tree: each is a pass over the whole board.
    roots_key: Hashable = ("roots allowed", tuple(required), forbidden)
    roots_ok = (
        view.derived(roots_key, lambda: view.roots_allowed(required, forbidden)) if required or forbidden else None
    )
    unsuffixed = resolved.request.unsuffixed
    member_of = unsuffixed.member_of if unsuffixed is not None else ()
    if member_of:
        members_key, in_them = _in_member_of(view, member_of, sharing)
        roots_key, roots_ok = (roots_key, members_key), _and(roots_ok, in_them)
    avoided = avoided_roots(conn, request.avoid_trees)
    group = request.server_group
    members = membership.member_hosts(conn, group, frozenset(sharing)) if group is not None else Counter[int]()
    group_ok = _group_mask_or_none(view, group.policy if group is not None else None, members)
    weighed = weighed_classes(conn)
    policy = soft_policy(group)

    def weights_of(mask: BoolArray | None) -> FloatArray:
        """The weights of the trees ``mask`` marks (None: of every tree), the others ``-inf``:
        weighed where they lie, without a copy of each of the board's columns gathered for them."""
        return weigh_arrays(
            view.ram,
            view.cpus,
            _disk_with_sharing(view, sharing, weighed),
            # Read by the soft policies' weighers only.
            _members_on(view, members) if policy is not None else _NO_MEMBERS,
            request.multipliers,
            policy,
            where=mask,
        )

    def too_full() -> BoolArray:
        """The trees the board thinks too full that the request would otherwise allow."""
        return _both(_both(~_room_for(view, plain, sharing), _and(roots_ok, _avoided_mask(view, avoided))), group_ok)

    if not avoided and group_ok is None and policy is None:
        # Weights that depend on the view and the request alone: kept between picks.
        kept = _kept_weights(view, plain, sharing, weighed, (roots_key, roots_ok), request.multipliers)
        weights, fitted = kept.weights, kept.fitted
        allowed_count = fitted
        if not allowed_count:
            return None
    else:
        fits = _both(_room_for(view, plain, sharing), _and(roots_ok, _avoided_mask(view, avoided)))
        allowed = _both(fits, group_ok)
        allowed_count = int(np.count_nonzero(allowed))
        if not allowed_count:
            return None
        weights = weights_of(None if allowed_count == len(view.roots) else allowed)
        fitted = int(np.count_nonzero(fits))
    ranking = _weighed_best_first(weights)
    tried = [(chosen, float(weights[chosen])) for chosen in itertools.islice(ranking, MOST_TRIES)]
    searched = finder.candidates_in_each([int(view.roots[index]) for index, _ in tried[:SEARCHED_IN_THE_READ]])
    trees = [
        PlannedTree(index, int(view.roots[index]), weight, searched.get(int(view.roots[index]), ()))
        for index, weight in tried
    ]
    rest = itertools.chain(
        (PlannedTree(chosen, int(view.roots[chosen]), float(weights[chosen])) for chosen in ranking),
        # Then those the board thinks too full, for the alternates only: freed since it was read?
        _freed_since(view, too_full, weights_of),
    )
    return BoardPlan(view, board, trees, finder.providers, frozenset(sharing), weighed, fitted, allowed_count, rest)


def _kept_weights(
    view: BoardView,
    plain: Sequence[tuple[int, int]],
    sharing: Mapping[int, ProviderData],
    weighed: Mapping[int, str],
    roots: tuple[Hashable, BoolArray | None],
    multipliers: Multipliers,
) -> Weighed:
    """``kept_weights`` of a request of ``plain``'s amounts on ``view``, as the sharing providers
    are now."""
    taking = _pools_taking(plain, sharing)
    shared = _shared_disk(view, sharing, weighed)
    served_keys = tuple(sorted((rc, _pools_key(pools)) for rc, pools in taking.items()))
    request = WeighedRequest(
        amounts=tuple(plain),
        served={rc: _served_mask(view, pools) for rc, pools in taking.items()},
        roots_ok=roots[1],
        shared_disk=shared[1] if shared is not None else None,
        multipliers=multipliers,
    )
    key = ("weights", request.amounts, served_keys, roots[0], shared and shared[0], multipliers)
    return kept_weights(view, request, key)


def _weighed_best_first(weights: FloatArray) -> Iterator[int]:
    """The trees ``weights`` weighed (not ``-inf``), best first."""
    for chosen in best_first_of(weights):
        if weights[chosen] == -np.inf:
            return
        yield int(chosen)


_NO_MEMBERS: Final = np.zeros(0)


def _and(mask: BoolArray | None, other: BoolArray | None) -> BoolArray | None:
    """Both masks (None: every tree)."""
    if mask is None:
        return other
    if other is None:
        return mask
    return mask & other


def _both(mask: BoolArray, other: BoolArray | None) -> BoolArray:
    """``mask``, narrowed by ``other`` if there is one."""
    return mask if other is None else mask & other


def _room_for(view: BoardView, plain: Sequence[tuple[int, int]], sharing: Mapping[int, ProviderData]) -> BoolArray:
    """The trees with room for each of ``plain``'s amounts: on one of their providers, or on a sharing
    provider anchored to them."""
    taking = _pools_taking(plain, sharing)
    room: BoolArray | None = None
    for rc, amount in plain:
        may_fit = view.room_of(rc) >= amount
        pools = taking.get(rc)
        if pools:
            may_fit[_anchored_to_any(view, pools)] = True
        room = may_fit if room is None else np.logical_and(room, may_fit, out=room)
    return room if room is not None else np.ones(len(view.roots), dtype=bool)


def _pools_taking(
    plain: Sequence[tuple[int, int]], sharing: Mapping[int, ProviderData]
) -> dict[int, list[ProviderData]]:
    """The sharing providers with room for each class ``plain`` asks, in one pass over them."""
    amounts = dict(plain)
    taking: dict[int, list[ProviderData]] = {}
    for shared in sharing.values():
        for rc, inventory in shared.inventories.items():
            amount = amounts.get(rc)
            if amount is not None and inventory.can_take(amount):
                taking.setdefault(rc, []).append(shared)
    return taking


def _pools_key(pools: Sequence[ProviderData]) -> frozenset[tuple[int, frozenset[int], int]]:
    """What of ``pools`` decides the trees they serve."""
    return frozenset((shared.id, shared.aggregates, shared.root_id) for shared in pools)


def _in_member_of(
    view: BoardView, member_of: Sequence[frozenset[int]], sharing: Mapping[int, ProviderData]
) -> tuple[Hashable, BoolArray]:
    """The trees that may serve a group naming ``member_of`` (each set: any of its aggregates),
    and the key it is kept under: for every set, those with a provider in one of its aggregates,
    or served by a sharing provider in one. Each provider serving the group, or its tree's root,
    must be in every set, so a tree outside this mask has no candidate; one inside it may still
    have none, which the search of the tree decides."""
    in_sets = [[shared for shared in sharing.values() if shared.aggregates & any_of] for any_of in member_of]
    key = ("member of", tuple(member_of), tuple(_pools_key(pools) for pools in in_sets))

    def mask() -> BoolArray:
        found = np.ones(len(view.roots), dtype=bool)
        for any_of, pools in zip(member_of, in_sets, strict=True):
            in_set = np.zeros(len(view.roots), dtype=bool)
            for aggregate in any_of:
                trees = view.by_aggregate.get(aggregate)
                if trees is not None:
                    in_set[trees] = True
            if pools:
                in_set[_anchored_to_any(view, pools)] = True
            found &= in_set
        return found

    return key, view.derived(key, mask)


def _anchored_to_any(view: BoardView, pools: Sequence[ProviderData]) -> IndexArray:
    """The trees any of ``pools`` is anchored to; the same pools come back pick after pick, and
    marking each one's trees cost a pick at 100,000 hosts more than its weighing."""

    def union() -> IndexArray:
        return np.unique(np.concatenate([_anchored(view, shared) for shared in pools]))

    return view.derived(("anchored to any", _pools_key(pools)), union)


def _served_mask(view: BoardView, pools: Sequence[ProviderData]) -> BoolArray:
    """``_anchored_to_any`` as a mask over the trees."""

    def mask() -> BoolArray:
        served = np.zeros(len(view.roots), dtype=bool)
        served[_anchored_to_any(view, pools)] = True
        return served

    return view.derived(("served by", _pools_key(pools)), mask)


def _avoided_mask(view: BoardView, avoided: frozenset[int]) -> BoolArray | None:
    return board_mask(view.roots, avoided) if avoided else None


def _freed_since(
    view: BoardView, mask_of: Callable[[], BoolArray], weights_of: Callable[[BoolArray], FloatArray]
) -> Iterator[PlannedTree]:
    """The trees ``mask_of()`` marks, best first, found and weighed only once the walk gets to them."""
    mask = mask_of()
    if not mask.any():
        return
    weights = weights_of(mask)
    for index in _weighed_best_first(weights):
        yield PlannedTree(index, int(view.roots[index]), float(weights[index]))


def claim_on_board(
    conn: Connection,
    request: PickRequest,
    resolved: ResolvedQuery,
    cache: ProviderCache,
    plan: BoardPlan,
    *,
    bare_first_claim: bool = False,
) -> Pick | None:
    """In the pick's write transaction (its server group locked): the first planned tree that the
    group's policy still allows and that can be claimed, claimed, with the alternates asked for from
    the trees ranked after it; None when none can be claimed. ``bare_first_claim``: the first claim
    written is written bare (``claim_tree``): refused, it raises ``BareClaimRefused``. (A bare claim
    either holds or raises, so every claim here until one is written is the first.)"""
    group = request.server_group
    members = membership.member_hosts(conn, group, plan.sharing_ids) if group is not None else Counter[int]()
    class_names = {rc: name for name, rc in resolved.class_ids.items()}
    finder: CandidateFinder | None = None
    plan.taken.clear()  # a transaction run again claims again
    for position, tree in enumerate(plan.trees):
        if not group_allows(group.policy if group is not None else None, members, tree.root_id):
            continue
        providers = plan.providers
        claimed = claim_tree(conn, request.consumer, tree.candidates, providers, class_names, bare=bare_first_claim)
        if claimed is None:
            # Not searched in the read, or taken since: the tree as this transaction sees it.
            finder = finder or CandidateFinder(
                conn, resolved.request, cache, limit=CANDIDATES_PER_TREE, max_candidates=CANDIDATES_PER_TREE
            )
            providers = finder.providers
            found = finder.candidates_in(tree.root_id)
            claimed = claim_tree(conn, request.consumer, found, providers, class_names, bare=bare_first_claim)
        if claimed is None:
            continue
        if group is not None:
            membership.add_member(conn, group.uuid, request.consumer.uuid, tree.root_id)
        own = _own_amounts(claimed.candidate.allocations, plan.sharing_ids)
        pools = {pid: by_class for pid, by_class in claimed.candidate.allocations.items() if pid in plan.sharing_ids}
        plan.taken.append(partial(plan.view.take, tree.index, own, plan.weighed))
        plan.taken.append(partial(plan.board.took_from_pools, pools))
        later = itertools.chain(plan.trees[position + 1 :], plan.rest)
        alternates = alternates_after(
            conn,
            resolved.request,
            cache,
            wanted=request.alternates,
            ranked=((t.root_id, t.weight) for t in later),
            claimed_root=tree.root_id,
            group=group,
            members=members,
            class_names=class_names,
        )
        return Pick(
            claimed.allocations,
            claimed.mappings,
            providers[tree.root_id].uuid,
            tree.weight,
            plan.fitted,
            plan.allowed,
            alternates,
        )
    return None


def _anchored(board: BoardView, shared: ProviderData) -> npt.NDArray[np.intp]:
    """The trees in an aggregate with this sharing provider, other than its own."""
    return board.anchored(shared.aggregates, shared.root_id)


def _group_mask(board: BoardView, policy: str | None, members: Counter[int]) -> npt.NDArray[np.bool_]:
    """The trees the group's hard policy leaves (all when it has no members yet)."""
    found = _group_mask_or_none(board, policy, members)
    return found if found is not None else np.ones(len(board.roots), dtype=bool)


def _group_mask_or_none(board: BoardView, policy: str | None, members: Counter[int]) -> BoolArray | None:
    """``_group_mask``, None where it leaves every tree."""
    if policy not in ("anti-affinity", "affinity") or not members:
        return None
    holding = np.isin(board.roots, np.fromiter(members, dtype=np.int64))
    return ~holding if policy == "anti-affinity" else holding


def _members_on(board: BoardView, members: Counter[int]) -> npt.NDArray[np.float64]:
    counts = np.zeros(len(board.roots))
    for root, count in members.items():
        index = board.index_of.get(root)
        if index is not None:
            counts[index] = count
    return counts


def _disk_with_sharing(
    board: BoardView, sharing: Mapping[int, ProviderData], weighed: Mapping[int, str]
) -> npt.NDArray[np.float64]:
    """Each tree's free disk with the whole free disk of every sharing provider anchored to it, as
    ``berth.store.pick.host_facts`` counts it."""
    shared = _shared_disk(board, sharing, weighed)
    return board.disk if shared is None else board.disk + shared[1]


def _shared_disk(
    board: BoardView, sharing: Mapping[int, ProviderData], weighed: Mapping[int, str]
) -> tuple[Hashable, FloatArray] | None:
    """The free disk each tree sees on the sharing providers anchored to it, and a key naming
    what it was worked out from; None when no sharing provider has disk."""
    disk_class = next((rc for rc, name in weighed.items() if name == "DISK_GB"), None)
    pools = [
        (shared, inventory)
        for shared in sharing.values()
        if disk_class is not None and (inventory := shared.inventories.get(disk_class)) is not None
    ]
    if not pools:
        return None
    free = tuple((shared, free_amount("DISK_GB", inventory, inventory.used)) for shared, inventory in pools)
    key = ("sharing disk", frozenset((shared.id, shared.aggregates, shared.root_id, amount) for shared, amount in free))

    def shared_disk() -> FloatArray:
        # (Whole numbers of GB: summed in any order, the same.)
        extra = np.zeros(len(board.roots))
        for shared, amount in free:
            extra[_anchored(board, shared)] += amount
        return extra

    return key, board.derived(key, shared_disk)


def _own_amounts(allocations: Mapping[int, Mapping[int, int]], sharing: Collection[int]) -> dict[int, int]:
    """What a candidate places on its tree's own providers, by class."""
    amounts: Counter[int] = Counter()
    for provider_id, by_class in allocations.items():
        if provider_id not in sharing:
            amounts.update(by_class)
    return dict(amounts)
