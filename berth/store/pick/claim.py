"""Writing the allocation a pick chose: the first of a tree's candidates that still fits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from sqlalchemy import Connection

from berth.domain.candidates import Candidate, ProviderData
from berth.domain.errors import BadRequest, ConcurrentUpdate, Conflict
from berth.store.pick.request import Consumer
from berth.store.placement.allocations import ConsumerAllocations, replace_allocations
from berth.store.placement.taking import ConsumerNotWritten
from berth.store.quotas import own_count
from berth.store.rawsql import attempt
from berth.store.write_edges import learn, local_setting

# What a claim learns (``berth.store.write_edges.learn``) of a consumer whose project had neither a
# quota counter nor a limit when its row was written.
UNLIMITED_CONSUMER = "berth.pick.unlimited_consumer"


@dataclass(frozen=True)
class Claimed:
    """The candidate written, and its allocations and mappings by provider uuid and class name."""

    candidate: Candidate
    # provider uuid -> resource class -> amount
    allocations: dict[str, dict[str, int]]
    # request group suffix -> provider uuids
    mappings: dict[str, list[str]]


class BareClaimRefused(Exception):
    """A claim written without a SAVEPOINT (``claim_tree``'s ``bare``) was refused: the transaction
    holds part of it and must be rolled back whole."""


def claim_tree(
    conn: Connection,
    consumer: Consumer,
    candidates: Sequence[Candidate],
    providers: Mapping[int, ProviderData],
    class_names: Mapping[int, str],
    *,
    bare: bool = False,
) -> Claimed | None:
    """The first of the tree's candidates that could be written, or None when concurrent writers
    left room for none.

    ``bare``: the first candidate is written without a SAVEPOINT, and a refusal raises
    ``BareClaimRefused`` instead of trying the next. For the first write of a transaction that its
    caller can run again: on SQLite a SAVEPOINT keeps a copy of every page the claim changes, and
    single picks without one placed 5-13 % more a second at 10,000 hosts, where the refusal it
    guards against is rare (the candidate was read just before the write)."""
    for candidate in candidates:
        allocations = {
            providers[pid].uuid: {class_names[rc]: amount for rc, amount in by_rc.items()}
            for pid, by_rc in candidate.allocations.items()
        }
        known = {providers[pid].uuid: pid for pid in candidate.allocations}
        if _claim(conn, consumer, allocations, known, bare=bare):
            mappings = {suffix: [providers[pid].uuid for pid in ids] for suffix, ids in candidate.mappings.items()}
            return Claimed(candidate, allocations, mappings)
    return None


def _claim(
    conn: Connection,
    consumer: Consumer,
    allocations: dict[str, dict[str, int]],
    provider_ids: Mapping[str, int],
    *,
    bare: bool = False,
) -> bool:
    """Write the consumer's allocations, or nothing when a concurrent writer took the room meanwhile.

    A bare claim on PostgreSQL writes the consumer's row in the statement that takes the capacity
    (``replace_allocations``' ``consumer_counted_by_writer``); where the row cannot go in that way
    (its owners to be created, or its project's quota counted by the triggers), the claim is refused
    as bare claims are, and written again the usual way."""
    request = new_consumer_allocations(consumer, allocations)
    counted_by_writer = None
    if bare and conn.dialect.name == "postgresql":
        counted_by_writer = local_setting(own_count.SETTING) == consumer.uuid
    try:
        with nullcontext() if bare else attempt(conn):
            replace_allocations(
                conn,
                [request],
                provider_ids=provider_ids,
                new_consumers=True,
                consumer_counted_by_writer=counted_by_writer,
            )
    except ConcurrentUpdate:
        raise  # the consumer exists already: no other tree would change that
    except ConsumerNotWritten as unwritten:
        if unwritten.counted:
            own_count.remember(conn.engine, consumer.project_id, True)
        raise BareClaimRefused() from unwritten
    except (Conflict, BadRequest) as refused:
        # No room left, or a provider deleted since the search read it.
        if bare:
            raise BareClaimRefused() from refused
        return False
    if counted_by_writer is False:
        # Written only because its project has neither a counter nor a limit, which it cannot gain
        # before this transaction ends: the quota check after the write has nothing to read.
        learn(UNLIMITED_CONSUMER, consumer.uuid)
    return True


def new_consumer_allocations(consumer: Consumer, allocations: dict[str, dict[str, int]]) -> ConsumerAllocations:
    """What a pick writes for a consumer: its allocations, as a consumer that must not exist yet
    (no generation)."""
    return ConsumerAllocations(
        consumer_uuid=consumer.uuid,
        allocations=allocations,
        project_id=consumer.project_id,
        user_id=consumer.user_id,
        consumer_generation=None,
        consumer_type=consumer.consumer_type,
    )
