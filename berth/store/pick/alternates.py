"""The alternates of a pick: the next best trees after the one it claimed, each with one allocation
request that fits, written for none of them.

A Nova-style selection names, besides the host claimed, a few other hosts that pass, each with an
allocation request that the conductor writes itself when the claimed host refuses the build. The
pick has weighed every tree already (on the board, or in the full search), so the trees after the
claimed one in its order (ties in the same random order) are those alternates, at the cost of
searching a few trees; a scheduler need not run a candidates query of its own to find them.

Each tree is searched as the pick searches one (``CandidateFinder.candidates_in``), in the pick's
write transaction after its own write, so that an alternate fits the books as that transaction
sees them: a sharing provider the claim took from has that much less room. The server group's hard
policy counts the member just placed: under anti-affinity no tree holding a member is named, under
affinity only trees holding one (so none for a group's first member, whose tree is the only one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final

from sqlalchemy import Connection

from berth.domain.candidate_request import CandidateRequest
from berth.domain.candidates import Candidate, ProviderData
from berth.store.candidates.finder import CandidateFinder
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.pick.request import Alternate
from berth.store.server_groups.membership import ServerGroup

# The most alternates a pick names (the body's schema holds callers to it).
MAX_ALTERNATES: Final = 10
# Trees searched that turn out to fit no longer (a board behind the books, room taken since the
# search) before the walk gives up: alternates are a hint, and every tree costs a read in the write.
MOST_MISSES: Final = 16


def group_allows(policy: str | None, members: Counter[int], root_id: int) -> bool:
    """Whether the group's hard policy lets a member go to the tree, with members where they are."""
    if policy == "anti-affinity":
        return root_id not in members
    if policy == "affinity" and members:
        return root_id in members
    return True


def alternates_after(
    conn: Connection,
    request: CandidateRequest,
    cache: ProviderCache,
    *,
    wanted: int,
    ranked: Iterable[tuple[int, float]],
    claimed_root: int,
    group: ServerGroup | None,
    members: Counter[int],
    class_names: Mapping[int, str],
) -> tuple[Alternate, ...]:
    """Up to ``wanted`` trees of ``ranked`` (root id and weight, best first, after the claimed one)
    that the group allows with the member just placed on ``claimed_root`` counted (``members`` are
    those before it), each with its first candidate as the transaction sees the books now.

    ``ranked`` holds only trees the pick itself would have tried (those of its search, or those the
    board let through, the root's traits included): the search here checks what room is left."""
    if wanted <= 0:
        return ()
    policy = group.policy if group is not None else None
    placed = members + Counter({claimed_root: 1})
    # A finder of its own: one made before the pick's write holds the sharing providers as they were.
    finder = CandidateFinder(conn, request, cache, limit=1, max_candidates=1)
    found: list[Alternate] = []
    misses = 0
    for root_id, weight in ranked:
        if root_id == claimed_root or not group_allows(policy, placed, root_id):
            continue
        candidates = finder.candidates_in(root_id)
        if not candidates:
            misses += 1
            if misses >= MOST_MISSES:
                break
            continue
        found.append(_alternate(candidates[0], finder.providers, class_names, root_id, weight))
        if len(found) == wanted:
            break
    return tuple(found)


def _alternate(
    candidate: Candidate,
    providers: Mapping[int, ProviderData],
    class_names: Mapping[int, str],
    root_id: int,
    weight: float,
) -> Alternate:
    return Alternate(
        root_provider_uuid=providers[root_id].uuid,
        allocations={
            providers[pid].uuid: {class_names[rc]: amount for rc, amount in by_rc.items()}
            for pid, by_rc in candidate.allocations.items()
        },
        mappings={suffix: [providers[pid].uuid for pid in ids] for suffix, ids in candidate.mappings.items()},
        weight=weight,
    )
