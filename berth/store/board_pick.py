"""A pick weighed on the board (``berth.store.host_board``): every tree's facts at once.

For a request of one group of resources (``CandidateRequest.plain_resources``) and no instances
weigher, a tree may fit when, for each class asked, one of its providers has room for the amount
or a sharing provider with room is in an aggregate with one of them; the board tells the first for
every tree in one comparison, and the few sharing providers the second. The trees that may fit
and that the server group allows are weighed together (``weigh_arrays``: the weights
``berth.domain.weighing.weigh`` gives), then tried best first, ties in random order: each is
searched again alone, as the database holds it inside this transaction, and its first candidate
that still fits is written.

``None`` (the caller then searches every tree) when no tree on the board can be claimed after
``MOST_TRIES``: a board that is behind the books must not turn into a refusal while a tree fits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Final

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from berth.domain.candidate_request import CandidateRequest
from berth.domain.candidates import ProviderData
from berth.domain.weighing import Multipliers, best_first_of, free_amount, weigh_arrays
from berth.store import server_groups
from berth.store.candidate_names import ResolvedQuery
from berth.store.candidates import CandidateFinder
from berth.store.host_board import BoardView, weighed_classes
from berth.store.pick_claim import claim_tree
from berth.store.pick_request import Pick, PickRequest, soft_policy
from berth.store.provider_cache import ProviderCache

MOST_TRIES: Final = 16
# Candidates of one tree tried before the next tree: a plain request's are the same amounts on
# other providers of the tree.
CANDIDATES_PER_TREE: Final = 4


def on_board(request: CandidateRequest, multipliers: Multipliers) -> bool:
    """Whether a pick of ``request`` can be weighed on the board."""
    return request.plain_resources is not None and not multipliers.instances


def pick_on_board(
    conn: Connection, request: PickRequest, resolved: ResolvedQuery, cache: ProviderCache, board: BoardView
) -> Pick | None:
    """The pick claimed on the best tree of the board that could be claimed, or None."""
    if not len(board.roots):
        return None
    plain = resolved.request.plain_resources
    assert plain is not None  # on_board
    finder = CandidateFinder(
        conn, resolved.request, cache, limit=CANDIDATES_PER_TREE, max_candidates=CANDIDATES_PER_TREE
    )
    sharing = finder.sharing
    fits = np.ones(len(board.roots), dtype=bool)
    for rc, amount in plain:
        may_fit = board.room_of(rc) >= amount
        for shared in sharing.values():
            inventory = shared.inventories.get(rc)
            if inventory is not None and inventory.can_take(amount):
                may_fit[_anchored(board, shared)] = True
        fits &= may_fit
    group = request.server_group
    members = server_groups.member_hosts(conn, group.uuid, frozenset(sharing)) if group is not None else Counter[int]()
    allowed = fits & _group_mask(board, group.policy if group is not None else None, members)
    indexes = np.flatnonzero(allowed)
    if not len(indexes):
        return None
    weighed = weighed_classes(conn)
    weights = weigh_arrays(
        board.ram[indexes],
        board.cpus[indexes],
        _disk_with_sharing(board, sharing, weighed)[indexes],
        _members_on(board, members)[indexes],
        request.multipliers,
        soft_policy(group),
    )
    class_names = {rc: name for name, rc in resolved.class_ids.items()}
    for tries, chosen in enumerate(best_first_of(weights)):
        if tries >= MOST_TRIES:
            return None
        index = int(indexes[chosen])
        root_id = int(board.roots[index])
        claimed = claim_tree(conn, request.consumer, finder.candidates_in(root_id), finder.providers, class_names)
        if claimed is None:
            continue
        if group is not None:
            server_groups.add_member(conn, group.uuid, request.consumer.uuid, root_id)
        board.take(index, _own_amounts(claimed.candidate.allocations, sharing), weighed)
        return Pick(
            claimed.allocations,
            claimed.mappings,
            finder.providers[root_id].uuid,
            float(weights[chosen]),
            int(fits.sum()),
            len(indexes),
        )
    return None


def _anchored(board: BoardView, shared: ProviderData) -> npt.NDArray[np.intp]:
    """The trees in an aggregate with this sharing provider, other than its own."""
    found = [board.by_aggregate[a] for a in shared.aggregates if a in board.by_aggregate]
    if not found:
        return np.zeros(0, dtype=np.intp)
    trees = np.unique(np.concatenate(found))
    own = board.index_of.get(shared.root_id)
    return trees[trees != own] if own is not None else trees


def _group_mask(board: BoardView, policy: str | None, members: Counter[int]) -> npt.NDArray[np.bool_]:
    """The trees the group's hard policy leaves (all when it has no members yet)."""
    if policy not in ("anti-affinity", "affinity") or not members:
        return np.ones(len(board.roots), dtype=bool)
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
    ``berth.store.host_facts`` counts it."""
    disk = board.disk
    disk_class = next((rc for rc, name in weighed.items() if name == "DISK_GB"), None)
    for shared in sharing.values():
        inventory = shared.inventories.get(disk_class) if disk_class is not None else None
        if inventory is None:
            continue
        anchored = _anchored(board, shared)
        if len(anchored):
            if disk is board.disk:
                disk = disk.copy()
            disk[anchored] += free_amount("DISK_GB", inventory, inventory.used)
    return disk


def _own_amounts(allocations: Mapping[int, Mapping[int, int]], sharing: Mapping[int, ProviderData]) -> dict[int, int]:
    """What a candidate places on its tree's own providers, by class."""
    amounts: Counter[int] = Counter()
    for provider_id, by_class in allocations.items():
        if provider_id not in sharing:
            amounts.update(by_class)
    return dict(amounts)
