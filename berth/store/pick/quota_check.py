"""The quotas of a pick's consumers, checked after the pick has written them (and removed its
victims).

A single pick on PostgreSQL for a project with limits counts its new consumer itself and checks its
quotas in the same statement (``berth.store.quotas.own_count``: announced before its first
allocation by ``count_own_consumer``); elsewhere, and for a gang, the triggers count the write and
``berth.store.quotas.enforcement`` reads the usage it left."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import Connection, Engine

from berth.domain.candidate_query import CandidateQuery
from berth.store.pick.claim import UNLIMITED_CONSUMER
from berth.store.pick.request import Consumer, Preempted
from berth.store.quotas import own_count
from berth.store.quotas.enforcement import Released, asked_by_query, check_claims
from berth.store.quotas.limits import CONSUMERS
from berth.store.rawsql import fetch
from berth.store.write_edges import learned, local_setting

# What a consumer holds, by resource class name, with its owner: the moving instance of a move's pick.
_HOLDINGS = """
SELECT p.external_id, u.external_id, rc.name, SUM(a.used)
FROM consumers c
JOIN projects p ON p.id = c.project_id
JOIN users u ON u.id = c.user_id
JOIN allocations a ON a.consumer_id = c.uuid
JOIN resource_classes rc ON rc.id = a.resource_class_id
WHERE c.uuid = ?
GROUP BY p.external_id, u.external_id, rc.name"""


def moving_holdings(conn: Connection, moving: str, query: CandidateQuery) -> tuple[Preempted, ...]:
    """What the instance a move places again holds of the classes the pick asks for: given back
    towards the quota, since the move's claim takes them over when it lands (the source's are
    dropped then), though counted until then. A move to the same size thus never raises its project's
    usage, as Nova checks no quota for a migration or an evacuation, and a resize raises it by what
    it adds. Nothing when it holds nothing."""
    asked = asked_by_query(query)
    rows = fetch(conn, _HOLDINGS, (moving,))
    if not rows:
        return ()
    held = {str(name): int(used) for _, _, name, used in rows if name in asked}
    project_id, user_id = str(rows[0][0]), str(rows[0][1])
    return (Preempted(moving, project_id, 0, "", user_id, held),)


def settings_for_pick(engine: Engine, consumer: Consumer) -> dict[str, str]:
    """The transaction-local settings a single pick's write may be begun with (``Database.write``),
    which spare ``count_own_consumer`` a round trip: the consumer named for the counters' triggers,
    on PostgreSQL, for a project believed counted."""
    if engine.dialect.name != "postgresql" or not own_count.believed_counted(engine, consumer.project_id):
        return {}
    return {own_count.SETTING: consumer.uuid}


def count_own_consumer(conn: Connection, consumer: Consumer) -> bool:
    """Before a single pick's first allocation: whether it counts its consumer itself
    (``own_count``: on PostgreSQL, for a project it believes counted, or whose write was begun with
    the setting that says so, ``settings_for_pick``: the triggers pass that consumer by, whatever
    the belief has become since)."""
    if conn.dialect.name != "postgresql":
        return False
    if local_setting(own_count.SETTING) == consumer.uuid:
        return True
    if not own_count.believed_counted(conn.engine, consumer.project_id):
        return False
    own_count.count_own(conn, consumer.uuid)
    return True


def check_claimed_quota(
    conn: Connection,
    query: CandidateQuery,
    consumer: Consumer,
    preempted: Iterable[Preempted],
    counts_own: bool,
    *,
    moving: Iterable[Preempted] = (),
    last: bool = False,
) -> None:
    """A single pick's: refuse (409 ``berth.quota.exceeded``) its claim when it took its project or
    user over a limit; the victims removed for it free what they held in their own project and user,
    and the instance a move's pick places again (``moving_holdings``) gives back what it holds once
    the move lands. ``counts_own``: what ``count_own_consumer`` answered; ``last``: nothing follows
    in the transaction."""
    if not counts_own:
        if learned(UNLIMITED_CONSUMER) == consumer.uuid:
            own_count.remember(conn.engine, consumer.project_id, False)
            return
        limited = check_claimed_quotas(conn, query, [consumer], preempted, moving)
        if conn.dialect.name == "postgresql":
            own_count.remember(conn.engine, consumer.project_id, consumer.project_id in limited)
        return
    asked = {**asked_by_query(query), CONSUMERS: 1}
    own_count.count_and_check(
        conn,
        consumer.uuid,
        consumer.project_id,
        consumer.user_id,
        asked,
        _by_scope(consumer, preempted),
        _by_scope(consumer, moving),
        commit=last,
    )


def _by_scope(consumer: Consumer, holders: Iterable[Preempted]) -> dict[str | None, dict[str, int]]:
    """What ``holders`` of the consumer's project hold, by resource, for the project (None) and for
    the consumer's user (theirs alone)."""
    held: dict[str | None, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for holder in holders:
        if holder.project_id != consumer.project_id:
            continue
        for user in (None, holder.user_id) if holder.user_id == consumer.user_id else (None,):
            for name, amount in holder.held.items():
                held[user][name] += amount
            held[user][CONSUMERS] += 1
    return held


def check_claimed_quotas(
    conn: Connection,
    query: CandidateQuery,
    claimed: Iterable[Consumer],
    preempted: Iterable[Preempted] = (),
    moving: Iterable[Preempted] = (),
) -> set[str]:
    """Refuse (409 ``berth.quota.exceeded``) the claims of ``claimed``, each given what the query
    asks, when they took a project or user over a limit; the victims removed for them free what
    they held in their own project and user, and the instance moved gives it back once the move
    lands. The projects that had limits."""
    each = asked_by_query(query)
    return check_claims(
        conn,
        [(consumer.project_id, consumer.user_id, each) for consumer in claimed],
        [Released(victim.project_id, victim.user_id, victim.held) for victim in preempted],
        [Released(instance.project_id, instance.user_id, instance.held) for instance in moving],
    )
