"""The source's side of an evacuation: cleaning up after instances rebuilt elsewhere while it was down.

An evacuated instance holds the destination's allocations; the migration consumer the destination
created holds the source's, so that they stay counted until the source comes back. When it does,
``start()`` (and every audit) finds claims whose instance now holds allocations elsewhere, deletes
the migration consumer holding exactly the claim's allocations here, and forgets the claim.
Placement keeps no link between a migration consumer and its instance, so the match is by amounts
and project; a conductor that knows the migration calls ``cleanup_evacuated`` instead.
"""

from __future__ import annotations

import logging

from berth.clients.errors import ClaimError
from berth.clients.placement import ConsumerState
from berth.domain.host.allocations import ByConsumer
from berth.domain.host.records import ACTIVE, INCOMING, MIGRATION, SHELVED, SOFT_DELETED, ClaimRecord
from berth.tracker.host_parts import HostParts
from berth.tracker.recovery import PendingOp

LOG = logging.getLogger(__name__)


def cleanup_evacuations(tracker: HostParts, snapshot: ByConsumer | None = None) -> list[dict[str, str | None]]:
    """Find the instances evacuated while this host was down and clean up after them (under the lock)."""
    settled = [r for r in tracker.store.all() if r.state in (ACTIVE, SHELVED, SOFT_DELETED) and r.pending_op is None]
    if not settled:
        return []
    snapshot = tracker.placement_snapshot() if snapshot is None else snapshot
    absent = [r for r in settled if r.consumer_uuid not in snapshot]
    if not absent:
        return []
    migrations = _UnclaimedMigrations(tracker, snapshot)
    cleaned: list[dict[str, str | None]] = []
    for record in absent:
        if not _moved_away(tracker, record):
            continue  # lost allocations, not a move: the audit reports it
        migration = migrations.take(record)
        if migration is not None:
            tracker.operations.run(record, PendingOp.EVACUATED, migration_uuid=migration)
        else:
            tracker.operations.run(record, PendingOp.FORGET)
        LOG.info(
            "%s: instance %s was evacuated while this host was down; cleaned up (migration %s)",
            tracker.host,
            record.instance_uuid,
            migration,
        )
        cleaned.append({"instance_uuid": record.instance_uuid, "migration_uuid": migration})
    return cleaned


def cleanup_evacuated(tracker: HostParts, instance_uuid: str, migration_uuid: str) -> list[str]:
    """The instance was evacuated away while this host was down: drop what is left here (under the lock)."""
    records = [r for r in tracker.store.for_instance(instance_uuid) if r.state != INCOMING]
    held = tracker.placement.consumer(migration_uuid)
    migration_here = held.consumer_type == MIGRATION and bool(set(held.allocations) & tracker.our_providers())
    if records:
        # The caller's word is not enough: an instance that never left still holds its allocations
        # here, and dropping its claims would leave them counted by no claim. (One evacuated holds
        # them elsewhere, or nowhere once deleted since: its claims here are stale either way.)
        if not migration_here and tracker.placement.consumer(instance_uuid).on(tracker.our_providers()):
            raise ClaimError(
                f"instance {instance_uuid} was not evacuated from {tracker.host}: it still holds allocations "
                f"here and migration {migration_uuid} none; its claims stay"
            )
        return [tracker.operations.run(r, PendingOp.EVACUATED, migration_uuid=migration_uuid) for r in records]
    if migration_here:
        tracker.writer.clear(migration_uuid)
        return ["cleaned"]
    return []


def _moved_away(tracker: HostParts, record: ClaimRecord) -> bool:
    """Whether the instance now holds allocations on another host (its shared disk does not count)."""
    state = tracker.placement.consumer(record.instance_uuid)
    ours = tracker.our_providers()
    return not state.on(ours) and bool(state.outside(ours | tracker.sharing_providers()))


class _UnclaimedMigrations:
    """Migration consumers holding allocations here that no claim knows, each matched once at most."""

    def __init__(self, tracker: HostParts, snapshot: ByConsumer):
        self.tracker = tracker
        everyone = tracker.store.all()
        known = {r.consumer_uuid for r in everyone} | {r.instance_uuid for r in everyone}
        self._candidates = [c for c in snapshot if c not in known]
        self._states: dict[str, ConsumerState] = {}

    def take(self, record: ClaimRecord) -> str | None:
        ours = self.tracker.our_providers()
        for consumer in self._candidates:
            if consumer not in self._states:
                self._states[consumer] = self.tracker.placement.consumer(consumer)
            state = self._states[consumer]
            if (
                state.consumer_type == MIGRATION
                and state.on(ours) == record.allocations
                and state.project_id == record.project_id
            ):
                self._candidates.remove(consumer)
                return consumer
        return None
