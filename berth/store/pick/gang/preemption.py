"""A gang that may preempt: where the cloud as it stands cannot take ``min_count`` of its members, the
members that fit are placed as they are, and each of the others by a preemption of its own
(``berth.store.pick.preemption``: the cheapest set of strictly lower-priority consumers on one tree
the server group allows), until every member is placed or one cannot be. All of it inside one
SAVEPOINT of the gang's write transaction: when fewer than ``min_count`` are placed in the end, the
SAVEPOINT is rolled back, and no consumer was preempted for the gang.

A member is never the victim of another of its gang (they share one priority, and a victim's is
strictly lower); the group's policy holds between them, since each preemption reads the group's
members as this transaction has written them. A gang with a topology does not preempt (the API
refuses it): a victim's tree would have to be chosen within the aggregate the gang is placed in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sqlalchemy import Connection

from berth.domain.candidate_query import CandidateQuery
from berth.domain.weighing import Multipliers
from berth.store.candidates.names import ResolvedQuery
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.leases.ledger import set_lease
from berth.store.pick.preemption import preempt_and_claim
from berth.store.pick.priorities import set_priority
from berth.store.pick.request import Consumer, Pick, PickRequest
from berth.store.server_groups.membership import ServerGroup


class GangRequest(Protocol):
    """What preempting asks of a gang's request (``berth.store.pick.gang.GangRequest``)."""

    @property
    def query(self) -> CandidateQuery: ...
    @property
    def multipliers(self) -> Multipliers: ...
    @property
    def consumers(self) -> tuple[Consumer, ...]: ...
    @property
    def min_count(self) -> int: ...
    @property
    def server_group(self) -> ServerGroup | None: ...
    @property
    def lease_seconds(self) -> float | None: ...
    @property
    def priority(self) -> int: ...
    @property
    def avoid_trees(self) -> frozenset[str]: ...


def place_preempting(
    conn: Connection,
    request: GangRequest,
    resolved: ResolvedQuery,
    cache: ProviderCache,
    place_fitting: Callable[[], int],
    trees_fitted: int,
    trees_weighed: int,
) -> list[tuple[Consumer, Pick]] | None:
    """``place_fitting`` writes the members that fit without preempting (the gang's first consumers,
    as many as it says); then each later consumer is placed by preempting, in order, until one
    cannot be. The preempting members' picks, or None (nothing written) when fewer than
    ``min_count`` members were placed in all."""
    savepoint = conn.begin_nested()
    try:
        placed = place_fitting()
        preempting: list[tuple[Consumer, Pick]] = []
        for consumer in request.consumers[placed:]:
            chosen = _preempt_for(conn, request, consumer, resolved, cache, trees_fitted, trees_weighed)
            if chosen is None:
                break
            preempting.append((consumer, chosen))
        if placed + len(preempting) < request.min_count:
            savepoint.rollback()
            return None
    except BaseException:
        savepoint.rollback()
        raise
    savepoint.commit()
    return preempting


def _preempt_for(
    conn: Connection,
    request: GangRequest,
    consumer: Consumer,
    resolved: ResolvedQuery,
    cache: ProviderCache,
    trees_fitted: int,
    trees_weighed: int,
) -> Pick | None:
    """One member placed by preempting, as a single pick that may preempt places it (its lease set
    before its allocations; the gang's quotas are checked once it is written whole); None, with
    nothing of it written, when no tree can be made room on."""
    savepoint = conn.begin_nested()
    try:
        if request.lease_seconds is not None:
            set_lease(conn, consumer.uuid, request.lease_seconds)
        single = PickRequest(
            query=request.query,
            multipliers=request.multipliers,
            consumer=consumer,
            server_group=request.server_group,
            lease_seconds=request.lease_seconds,
            priority=request.priority,
            preempt=True,
            avoid_trees=request.avoid_trees,
        )
        chosen = preempt_and_claim(conn, single, resolved, cache, trees_fitted, trees_weighed)
        if chosen is None:
            savepoint.rollback()
            return None
        set_priority(conn, consumer.uuid, request.priority)
    except BaseException:
        savepoint.rollback()
        raise
    savepoint.commit()
    return chosen
