"""The quotas of a pick's consumers, checked after the pick has written them (and removed its
victims): ``berth.store.quotas.enforcement`` reads the usage the write left."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection

from berth.domain.candidate_query import CandidateQuery
from berth.store.pick.request import Consumer, Preempted
from berth.store.quotas.enforcement import Released, asked_by_query, check_written, claim_changes


def check_claimed_quotas(
    conn: Connection, query: CandidateQuery, claimed: Iterable[Consumer], preempted: Iterable[Preempted] = ()
) -> None:
    """Refuse (409 ``berth.quota.exceeded``) the claims of ``claimed``, each given what the query
    asks, when they took a project or user over a limit; the victims removed for them free what
    they held in their own project and user."""
    each = asked_by_query(query)
    check_written(
        conn,
        claim_changes(
            ((consumer.project_id, consumer.user_id, each) for consumer in claimed),
            (Released(victim.project_id, victim.user_id, victim.held) for victim in preempted),
        ),
    )
