"""What the audit compares: for each consumer, what the claims say it holds and what Placement has.

The scope of a consumer is what this host answers for:

- a consumer that holds a claim's allocations (an instance, or the migration of an outgoing move) is
  compared on the host's own providers (its tree, and providers it no longer reports that still
  hold allocations);
- a consumer that also holds the claim's shared disk (every claim but the outgoing side of a move,
  whose disk stays with the instance and is counted by the destination) is compared on the sharing
  providers the host uses as well: the whole of what it holds there is the claim's;
- a consumer no claim knows is compared on the host's own providers only: what it holds on a sharing
  provider may be another host's business.

A sharing provider's usage is therefore judged by this host's share of it: the claims' shared disk
against what their consumers hold there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from berth.clients.errors import PlacementError
from berth.domain.host import allocations
from berth.domain.host.allocations import Allocations, ByConsumer
from berth.domain.host.records import MOVING, OUTGOING, ClaimRecord
from berth.tracker.host_parts import HostParts


@dataclass
class ConsumerBooks:
    consumer: str
    scope: set[str]  # the providers compared
    claims: list[ClaimRecord] = field(default_factory=list)  # the settled claims it holds; none: a stranger
    claimed: Allocations = field(default_factory=dict)  # what the claims say it holds, in scope
    held: Allocations = field(default_factory=dict)  # what Placement says it holds, in scope

    @property
    def agree(self) -> bool:
        return allocations.clean(self.claimed) == allocations.clean(self.held)

    @property
    def moving(self) -> bool:
        return any(r.state in MOVING for r in self.claims)


@dataclass
class HostBooks:
    ours: set[str]  # the host's own providers
    pools: set[str]  # the sharing providers the host uses
    on_host: ByConsumer  # Placement's allocations on the host's own providers, by consumer
    consumers: dict[str, ConsumerBooks]

    def pool_usage(self, pool: str) -> tuple[dict[str, int], dict[str, int]]:
        """(what this host's claims use of ``pool``, what Placement says their consumers hold there)."""
        sharing = [b for b in self.consumers.values() if pool in b.scope]
        claimed = allocations.total(b.claimed for b in sharing).get(pool, {})
        held = allocations.total(b.held for b in sharing).get(pool, {})
        return claimed, held


def read_books(tracker: HostParts, on_host: ByConsumer | None = None) -> HostBooks:
    """The claims of ``tracker``'s host side by side with Placement's allocations, consumer by consumer."""
    ours = tracker.our_providers()
    pools = tracker.sharing_providers()
    on_host = tracker.placement_snapshot() if on_host is None else on_host
    books: dict[str, ConsumerBooks] = {}
    for record in tracker.store.all():
        if record.pending_op:
            continue
        consumer, with_shared = _holder(record, on_host)
        entry = books.setdefault(consumer, ConsumerBooks(consumer, set(ours)))
        entry.claims.append(record)
        entry.claimed = allocations.total([entry.claimed, record.allocations])
        if with_shared:
            entry.claimed = allocations.total([entry.claimed, record.shared_allocations])
            entry.scope |= pools
    for consumer in on_host:
        books.setdefault(consumer, ConsumerBooks(consumer, set(ours)))
    on_pools = _pool_allocations(tracker, pools)
    for entry in books.values():
        entry.held = allocations.clean(on_host.get(entry.consumer, {}))
        for pool in entry.scope & pools:
            if entry.consumer in on_pools[pool]:
                entry.held[pool] = on_pools[pool][entry.consumer]
        entry.held = allocations.clean(entry.held)
    return HostBooks(ours, pools, on_host, books)


def _holder(record: ClaimRecord, on_host: ByConsumer) -> tuple[str, bool]:
    """The consumer holding the claim's allocations, and whether it holds the claim's shared disk too."""
    if record.state == OUTGOING and record.migration_uuid not in on_host and record.instance_uuid in on_host:
        # The destination has not swapped yet, or swapped back: the instance still holds all of it.
        return record.instance_uuid, True
    return record.consumer_uuid, record.holds_shared


def _pool_allocations(tracker: HostParts, pools: set[str]) -> dict[str, dict[str, dict[str, int]]]:
    """pool -> consumer -> class -> amount; a pool the service no longer has holds nothing."""
    held = {}
    for pool in pools:
        try:
            held[pool] = tracker.placement.provider_allocations(pool)
        except PlacementError as e:
            if e.status != 404:
                raise
            held[pool] = {}
    return held
